"""Tests of dynamic shovels."""
