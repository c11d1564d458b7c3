"""read_body: a response's body, and a cancelled read that fires once."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import CancelledError
from twisted.internet.error import ConnectionAborted, ConnectionLost
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.client import PartialDownloadError, ResponseDone
from twisted.web.http import PotentialDataLoss

from txamqp09.testing.http import read_body


class _Transport(StringTransport):
    """A response body's transport that records an abort."""

    aborted = False

    def abortConnection(self) -> None:
        self.aborted = True


class _Response:
    """Just what read_body uses of an IResponse: it hands its body's
    protocol a transport; the test plays the connection."""

    code = 200
    phrase = b"OK"

    def deliverBody(self, protocol: Any) -> None:
        self.protocol = protocol
        self.transport = _Transport()
        protocol.makeConnection(self.transport)


class ReadBodyTests(SynchronousTestCase):
    def test_the_body_in_pieces(self) -> None:
        response = _Response()
        reading = read_body(response)  # type: ignore[arg-type]
        response.protocol.dataReceived(b"ab")
        response.protocol.dataReceived(b"c")
        self.assertNoResult(reading)
        response.protocol.connectionLost(Failure(ResponseDone()))
        self.assertEqual(self.successResultOf(reading), b"abc")

    def test_an_early_end_fails(self) -> None:
        response = _Response()
        reading = read_body(response)  # type: ignore[arg-type]
        response.protocol.dataReceived(b"ab")
        response.protocol.connectionLost(Failure(ConnectionLost()))
        self.failureResultOf(reading, ConnectionLost)
        response = _Response()
        reading = read_body(response)  # type: ignore[arg-type]
        response.protocol.dataReceived(b"ab")
        response.protocol.connectionLost(Failure(PotentialDataLoss()))
        self.assertEqual(self.failureResultOf(reading, PartialDownloadError).value.response, b"ab")

    def test_a_cancelled_read_aborts_and_fires_once(self) -> None:
        """Cancelling aborts the connection; the loss of that connection,
        which follows, does not fire the Deferred again (readBody's does:
        AlreadyCalledError, raised into whatever reported the loss)."""
        response = _Response()
        outcomes: list[Any] = []
        reading = read_body(response).addBoth(outcomes.append)  # type: ignore[arg-type]
        response.protocol.dataReceived(b"ab")
        reading.cancel()
        self.assertTrue(response.transport.aborted)
        response.protocol.connectionLost(Failure(ConnectionAborted()))
        self.assertEqual([outcome.type for outcome in outcomes], [CancelledError])
