"""Tests of txamqp09.client: offline against a scripted server, and live against brokers."""
