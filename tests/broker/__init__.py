"""Tests of txamqp09.broker: the server channel layer, the service, durability
across restarts and crashes, and real clients (pika, kombu, aio-pika, txAMQP)
over loopback. The model's own tests are in :mod:`tests.broker.model`."""
