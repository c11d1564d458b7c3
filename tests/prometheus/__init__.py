"""Tests of the Prometheus metrics listener (txamqp09.prometheus)."""
