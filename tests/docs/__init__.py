"""The guides in docs/: every complete example runs, against this project's
broker and, where the guide says so, against RabbitMQ."""
