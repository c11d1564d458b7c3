"""Tests of txamqp09.broker.dialects: each rule, and the 0-9-1 answers against RabbitMQ."""
