"""Durability: the broker model joined to a message store, restarts and crashes."""
