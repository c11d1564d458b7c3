"""Tests of the group of brokers on PostgreSQL (txamqp09.group)."""
