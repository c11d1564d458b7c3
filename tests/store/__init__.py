"""Tests of the durable stores."""
