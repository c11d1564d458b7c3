"""Public test helpers: brokers on loopback (this project's and RabbitMQ), fakes."""
