"""Stream queues: the model, the store, real clients, RabbitMQ, restarts."""
