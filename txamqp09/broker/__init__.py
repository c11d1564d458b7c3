"""The AMQP broker: connection and channel layers over a Twisted-free model."""
