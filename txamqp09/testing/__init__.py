"""Public test helpers (see docs/testing.rst): the broker and clients in memory
(:mod:`.memory`), scripted peers (:mod:`.scripted`), waiting on a condition
(:mod:`.waiting`), TLS certificates (:mod:`.certificates`), this broker on
loopback (:mod:`.broker`), stores that fail on demand (:mod:`.faults`), a
private RabbitMQ node (:mod:`.rabbitmq`) and HTTP answers read safely
(:mod:`.http`)."""
