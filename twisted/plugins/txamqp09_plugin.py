"""The ``amqp09`` twistd plugin: an AMQP 0-9 / 0-8 / 0-9-1 broker."""

from twisted.application.service import ServiceMaker

amqp09 = ServiceMaker(
    "txamqp09 AMQP broker", "txamqp09.tap", "An AMQP 0-9, 0-8 and 0-9-1 broker.", "amqp09"
)
