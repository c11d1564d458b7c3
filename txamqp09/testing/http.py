"""Reading an HTTP answer's body in tests, safe to cancel.

:func:`read_body` is :func:`twisted.web.client.readBody` without its
cancellation fault: cancelling ``readBody``'s Deferred aborts the
connection and fails the Deferred, and the aborted connection's loss then
fires the same Deferred again, which raises ``AlreadyCalledError`` into
the reactor (Twisted 26.10). Trial cancels what a test waits on when the
test times out, so a test timing out while it read an answer reported that
error besides its timeout::

    from twisted.web.client import Agent
    from txamqp09.testing.http import read_body

    response = await Agent(reactor).request(b"GET", url)
    body = await read_body(response)
"""

from __future__ import annotations

from typing import Any, Optional

from twisted.internet.defer import Deferred
from twisted.internet.protocol import Protocol, connectionDone
from twisted.python.failure import Failure
from twisted.web.client import PartialDownloadError, ResponseDone
from twisted.web.http import PotentialDataLoss
from twisted.web.iweb import IResponse

__all__ = ["read_body"]


class _BodyReader(Protocol):
    """Collects *response*'s body; :attr:`done` fires with it, unless it
    fired already (it was cancelled, which aborted the connection)."""

    def __init__(self, response: IResponse) -> None:
        self.response = response
        self.done: Deferred[bytes] = Deferred(self._abort)
        self.parts: list[bytes] = []

    def dataReceived(self, data: bytes) -> None:
        self.parts.append(data)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if self.done.called:
            return
        body = b"".join(self.parts)
        if reason.check(ResponseDone):
            self.done.callback(body)
        elif reason.check(PotentialDataLoss):
            self.done.errback(PartialDownloadError(self.response.code, self.response.phrase, body))
        else:
            self.done.errback(reason)

    def _abort(self, _: Deferred[bytes]) -> None:
        """The read was cancelled: close the connection at once."""
        abort: Optional[Any] = getattr(self.transport, "abortConnection", None)
        if abort is not None:
            abort()


def read_body(response: IResponse) -> Deferred[bytes]:
    """The whole body of *response*; fails with what ended it early
    (:class:`~twisted.web.client.PartialDownloadError` when the length was
    unknown and the connection ended). Cancelling it closes the connection
    at once and fails it with ``CancelledError``, once."""
    reader = _BodyReader(response)
    response.deliverBody(reader)
    return reader.done
