"""Links between brokers: what shovels and federation share.

- :mod:`.uri`: the ``amqp://`` URIs of a link's ends, checked as RabbitMQ
  checks them and resolved to connection parameters;
- :mod:`.redaction`: URIs shown without their credentials;
- :mod:`.validation`: RabbitMQ's runtime-parameter checks and their texts;
- :mod:`.link`: one end of a link, a connection kept open with backoff.
"""
