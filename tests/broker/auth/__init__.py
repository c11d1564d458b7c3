"""Tests of txamqp09.broker.auth: users, SASL, cred, permissions, tickets, TLS."""
