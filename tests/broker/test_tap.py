"""``twistd amqp09`` options and the service they build."""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.tap import Options, makeService


class OptionsTests(SynchronousTestCase):
    def build(self, *argv: str) -> list[Any]:
        options = Options()
        options.parseOptions(list(argv))
        return list(makeService(options, Clock()))

    def test_listeners_share_one_broker(self) -> None:
        services = self.build("--port", "5999", "--listen", "tcp:6000:interface=127.0.0.1")
        self.assertEqual([service.endpoint._port for service in services], [6000, 5999])
        self.assertIs(services[0].factory.broker, services[1].factory.broker)

    def test_connection_options_and_watermark(self) -> None:
        (service,) = self.build("--port", "5999", "--frame-max", "8192", "--heartbeat", "0",
                                "--high-watermark", "1000")
        factory = service.factory
        self.assertEqual((factory.options["frame_max"], factory.options["heartbeat"]), (8192, 0))
        self.assertEqual(factory.throttle.high_watermark, 1000)

    def test_bad_options(self) -> None:
        self.assertRaises(usage.UsageError, Options().parseOptions, ["--port", "x"])
        self.assertRaises(usage.UsageError, Options().parseOptions, ["--frame-max", "100"])
