"""Durable storage for the broker: an interface, one SQL layer with SQLite and PostgreSQL backends, and an in-memory store."""
