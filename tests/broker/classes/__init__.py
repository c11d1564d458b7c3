"""Tests of the file, stream, dtx, tunnel and message classes and 0-9's channel methods."""
