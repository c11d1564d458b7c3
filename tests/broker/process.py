"""The broker in a child process on 127.0.0.1, started, stopped and killed by tests."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.protocol import ProcessProtocol
from twisted.python.failure import Failure

__all__ = ["BrokerProcess"]

ROOT = str(Path(__file__).resolve().parents[2])
#: What Twisted logs when a TCP listener is up (the port is the group).
_LISTENING = re.compile(rb"ServerFactory starting on (\d+)")
#: Output kept to explain a broker that failed to start.
_OUTPUT_KEPT = 16384


class BrokerProcess(ProcessProtocol):
    """``python -m twisted amqp09`` with its store in *data_dir*, listening on a
    port of 127.0.0.1 the system picks (read from the broker's log, so nothing
    waits on a timer).

    :param extra: more command-line options for the broker.
    :param port: listen on this port (0: one the system picks), e.g. to
        come back on the same port after a restart.
    """

    def __init__(self, data_dir: str, *extra: str, port: int = 0) -> None:
        self.data_dir = os.path.abspath(data_dir)
        self.extra = extra
        self.port = port
        self.output = b""
        self._listening: Deferred[int] = Deferred()
        self._ended = False
        self._waiting: list[Deferred[None]] = []

    def start(self, reactor: Any) -> Deferred[int]:
        """Spawn the broker; fires with its port once it listens."""
        argv = [
            sys.executable, "-m", "twisted", "--log-format", "text", "amqp09",
            "--listen", f"tcp:{self.port}:interface=127.0.0.1", "--heartbeat", "0",
            "--data-dir", self.data_dir, *self.extra,
        ]
        environment = {**os.environ, "PYTHONPATH": ROOT}
        reactor.spawnProcess(self, sys.executable, argv, env=environment, path=ROOT)
        return self._listening

    @property
    def url(self) -> str:
        """An amqp:// URL of the running broker."""
        return f"amqp://guest:guest@127.0.0.1:{self.port}/"

    @property
    def running(self) -> bool:
        """The process has not ended yet."""
        return not self._ended

    def outReceived(self, data: bytes) -> None:
        self.output = (self.output + data)[-_OUTPUT_KEPT:]
        if not self._listening.called:
            found = _LISTENING.search(self.output)
            if found:
                self.port = int(found.group(1))
                self._listening.callback(self.port)

    errReceived = outReceived

    def processEnded(self, reason: Failure) -> None:
        if not self._listening.called:
            self._listening.errback(
                RuntimeError("the broker ended before listening:\n" + self.output.decode(errors="replace"))
            )
        reason.trap(ProcessDone, ProcessTerminated)
        self._ended = True
        waiting, self._waiting = self._waiting, []
        for waiter in waiting:
            waiter.callback(None)

    def stop(self) -> Deferred[None]:
        """SIGTERM (a clean shutdown); fires when the process has ended."""
        return self._signal("TERM")

    def kill(self) -> Deferred[None]:
        """SIGKILL; fires when the process has ended."""
        return self._signal("KILL")

    def _signal(self, name: str) -> Deferred[None]:
        ended: Deferred[None] = Deferred()
        if not self.running:
            ended.callback(None)
            return ended
        self._waiting.append(ended)
        assert self.transport is not None
        self.transport.signalProcess(name)
        return ended
