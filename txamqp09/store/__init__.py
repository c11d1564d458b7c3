"""Durable storage for the broker: an interface, SQLite and in-memory stores."""
