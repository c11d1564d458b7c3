"""Broker tests: model, server channel layer, and real clients over loopback."""
