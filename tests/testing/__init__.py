"""Tests of txamqp09.testing, the helpers this package ships for tests."""
