"""pika clients that fail over between the brokers of a group, counting what they see.

Each runs in a thread of its own with pika's blocking connection, trying
the brokers' ports in turn: a standby refuses the connection (it has no
AMQP listener), so a client finds the active broker at once. The
:class:`Publisher` publishes numbered persistent messages with publisher
confirms, one at a time, and publishes a number again on the next broker
when its confirm did not come; the :class:`Consumer` acknowledges every
delivery. The :class:`Ledger` they share says what was confirmed, what was
received, what was lost (confirmed, never received) and how many
deliveries were duplicates.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from typing import Any, Optional, Sequence

import pika
import pika.exceptions

__all__ = ["Consumer", "Ledger", "Publisher"]

QUEUE = "group-test"
#: Seconds between two attempts to connect when no broker accepts.
RETRY = 0.05
#: Heartbeat the clients ask for: a broker that hangs is left within a few seconds.
HEARTBEAT = 1


class Ledger:
    """What the clients saw, shared between their threads.

    :ivar failovers: connections lost by the publisher (it moved on).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._confirmed: set[int] = set()
        self._received: Counter[int] = Counter()
        self._confirm_times: list[float] = []
        self.failovers = 0

    def confirmed(self, number: int) -> None:
        with self._lock:
            self._confirmed.add(number)
            self._confirm_times.append(time.monotonic())

    def received(self, number: int) -> None:
        with self._lock:
            self._received[number] += 1

    @property
    def confirm_count(self) -> int:
        with self._lock:
            return len(self._confirmed)

    def confirms_after(self, moment: float) -> int:
        """Confirms that came after *moment* (``time.monotonic``)."""
        with self._lock:
            return sum(1 for at in self._confirm_times if at > moment)

    def longest_pause_after(self, moment: float) -> float:
        """The longest time between two confirms from *moment* on (seconds)."""
        with self._lock:
            times = [moment] + [at for at in self._confirm_times if at > moment]
        return max((later - earlier for earlier, later in zip(times, times[1:])), default=0.0)

    def lost(self) -> set[int]:
        """Confirmed numbers never received."""
        with self._lock:
            return self._confirmed - set(self._received)

    def duplicates(self) -> int:
        """Deliveries beyond the first of each number."""
        with self._lock:
            return sum(count - 1 for count in self._received.values())

    def summary(self) -> str:
        with self._lock:
            confirmed, received = len(self._confirmed), len(self._received)
        return (
            f"{confirmed} confirmed, {received} received, {len(self.lost())} lost, "
            f"{self.duplicates()} duplicates, {self.failovers} publisher failovers"
        )


def _parameters(port: int) -> pika.ConnectionParameters:
    return pika.ConnectionParameters(
        "127.0.0.1", port, heartbeat=HEARTBEAT, connection_attempts=1, socket_timeout=2,
        blocked_connection_timeout=30,
    )


class _Client(threading.Thread):
    """Connects to the first of *ports* that accepts, again after each loss."""

    def __init__(self, ports: Sequence[int], ledger: Ledger) -> None:
        super().__init__(daemon=True)
        self.ports = list(ports)
        self.ledger = ledger
        self.stopping = threading.Event()
        self.error: Optional[BaseException] = None

    def run(self) -> None:
        try:
            for port in itertools.cycle(self.ports):
                if self.stopping.is_set():
                    return
                try:
                    connection = pika.BlockingConnection(_parameters(port))
                except pika.exceptions.AMQPError:
                    time.sleep(RETRY)
                    continue
                try:
                    self.work(connection)
                except pika.exceptions.AMQPError:
                    self.lost()
                finally:
                    if connection.is_open:
                        try:
                            connection.close()
                        except pika.exceptions.AMQPError:
                            pass
        except BaseException as error:
            self.error = error
            raise

    def work(self, connection: pika.BlockingConnection) -> None:
        raise NotImplementedError

    def lost(self) -> None:
        """The connection was lost."""

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)


class Publisher(_Client):
    """Publishes 0, 1, 2... persistently with confirms (see the module's docstring)."""

    def __init__(self, ports: Sequence[int], ledger: Ledger, body_size: int = 16) -> None:
        super().__init__(ports, ledger)
        self.next = 0
        self.padding = b"." * body_size

    def work(self, connection: pika.BlockingConnection) -> None:
        channel = connection.channel()
        channel.confirm_delivery()
        channel.queue_declare(QUEUE, durable=True)
        persistent = pika.BasicProperties(delivery_mode=2)
        while not self.stopping.is_set():
            body = b"%d " % self.next + self.padding
            try:
                channel.basic_publish("", QUEUE, body, persistent)
            except pika.exceptions.NackError:
                continue
            self.ledger.confirmed(self.next)
            self.next += 1

    def lost(self) -> None:
        self.ledger.failovers += 1


class Consumer(_Client):
    """Takes and acknowledges every message (see the module's docstring)."""

    def work(self, connection: pika.BlockingConnection) -> None:
        channel = connection.channel()
        channel.basic_qos(prefetch_count=50)
        channel.queue_declare(QUEUE, durable=True)
        for method, _, body in channel.consume(QUEUE, inactivity_timeout=0.1):
            if self.stopping.is_set():
                return
            if method is None:
                continue
            self.ledger.received(int(body.split(b" ", 1)[0]))
            channel.basic_ack(method.delivery_tag)

