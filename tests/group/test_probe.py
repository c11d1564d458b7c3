"""What probing a member's listeners tells (:mod:`txamqp09.group.probe`)."""

from __future__ import annotations

import socket

from twisted.trial.unittest import SynchronousTestCase

from txamqp09.group.probe import Listening, listening
from txamqp09.group.records import Address
from txamqp09.testing.rabbitmq import free_port


class ListeningTests(SynchronousTestCase):
    """A standby takes a lease early only when the holder's listeners refuse."""

    def test_a_listener_that_accepts_says_yes(self) -> None:
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen()
            address = Address("amqp", "127.0.0.1", server.getsockname()[1])
            self.assertIs(listening([address], 1.0), Listening.YES)

    def test_listeners_that_all_refuse_say_no(self) -> None:
        refusing = [Address("amqp", "127.0.0.1", free_port()), Address("amqp/ssl", "127.0.0.1", free_port())]
        self.assertIs(listening(refusing, 1.0), Listening.NO)

    def test_no_listener_recorded_tells_nothing(self) -> None:
        """A holder that has not recorded its listeners yet may be serving:
        the standby must wait for the lease's expiry, not take it at once."""
        self.assertIs(listening([], 1.0), Listening.UNKNOWN)
