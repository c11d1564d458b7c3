"""High availability: a group of two brokers on PostgreSQL next to a RabbitMQ 3-node cluster, in the same run.

This broker: two ``twistd amqp09`` members of a group (``--store`` naming a
PostgreSQL primary and its synchronous streaming standby, both on this
machine, txamqp09.testing.postgresql). RabbitMQ: three nodes joined into
one cluster (txamqp09.testing.rabbitmq.RabbitMQCluster), the queue a quorum
queue whose leader is on the first node. Each broker's queue is declared
with ``x-queue-type: quorum``.

Throughput, the same load on both: 1 producer with publisher confirms (at
most 200 unconfirmed), 1 consumer (prefetch 200, an acknowledgement with
``multiple`` every 50 deliveries), persistent messages of 1 KiB and of
16 B, through the active member / the leader's node (the lean raw-socket
client of bench/broker.py and bench/durable.py).

Failover, each figure the seconds from the failure to the first confirm of
a message published after it, by a client that publishes one persistent
message at a time and waits for its confirm:

``kill -9 of the active``
    with the backlog (100,000 persistent 1 KiB messages by default)
    queued; the client moves to the standby's address as soon as its
    connection ends. Beside the first confirm, the seconds until the
    standby's AMQP port accepted a connection and the restore time the new
    active logged. RabbitMQ: kill -9 of the leader's node, the client on a
    surviving node.
``SIGSTOP of the active for 8 s``
    a client of the standby's address; the stopped broker is resumed
    (SIGCONT) 8 s after the stop: it must confirm nothing more (a client
    that published to it counts its confirms after the resume) and exit
    fenced (status 75). RabbitMQ: SIGSTOP of the leader's node, the
    client on a surviving node.
``kill -9 of the PostgreSQL primary``
    (of its every process, as when its machine is lost) and at once
    ``pg_ctl promote`` of its standby; the active broker reconnects to the
    promoted server by itself, or, if it could not renew its lease in time,
    is fenced and the standby takes over (the client has both addresses).

After each failure, everything confirmed must be in the queue: it is
drained and the report counts confirmed, received, lost (must be 0) and
duplicated messages. A killed or fenced member is started again as a
standby for the next scenario.

Run::

    python bench/ha.py                              # both, every figure
    python bench/ha.py --messages 200000 --repeat 3
    python bench/ha.py --only txamqp09 --backlog 2000 --messages 2000 --json
    python bench/ha.py --only takeover --repeat 5   # the group's kill -9 alone, five times

``--json`` prints the figures as one JSON line (for tests). Throughput runs
alternate between the brokers; ``--repeat N`` keeps the fastest of N (with
``--only takeover``: the kill -9 of the active, N times, each figure kept).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import selectors
import signal
import struct
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Optional

from broker import Connection, Txamqp09Broker, _process_tree
from durable import QUEUE, Confirms, run

from txamqp09.group.records import Address
from txamqp09.group.probe import Listening, listening
from txamqp09.testing.postgresql import PostgreSQL, group_url, psycopg_missing
from txamqp09.testing.rabbitmq import RabbitMQ, RabbitMQCluster, free_port, rabbitmq_missing
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.frames import content_frames

#: The queue's arguments on both brokers.
QUORUM = {"x-queue-type": "quorum"}
#: Seconds the active (or the leader's node) stays stopped.
HANG_SECONDS = 8.0
#: The exit status of a fenced member.
EXIT_FENCED = 75
#: Seconds any one wait may take before the run fails.
WAIT = 120.0
#: Seconds a client waits between two connection attempts.
RETRY = 0.01
#: Seconds between two looks at whether a standby's AMQP port listens.
LISTEN_POLL = 0.002
#: Confirms a failover client collects before the failure.
WARM_CONFIRMS = 20
#: The store's restore, as a broker logs it (the seconds are the group).
_RESTORED = re.compile(r"persistent messages in ([0-9.]+) s")
_ID = struct.Struct(">Q")
_FRAME_HEADER = struct.Struct(">BHI")
_DELIVER = (60, 60)
_ACK = struct.Struct(">BHIHHQBB")


# -- the messages --------------------------------------------------------------


def body(number: int, size: int) -> bytes:
    """A message body of *size* bytes (at least 8) starting with *number*."""
    return _ID.pack(number).ljust(max(size, _ID.size), b"x")


def publish_frames(number: int, size: int, frame_max: int, queue: str = QUEUE) -> bytes:
    """The frames publishing persistent message *number* to *queue*."""
    return content_frames(
        1, spec.BasicPublish(exchange="", routing_key=queue), spec.BasicProperties(delivery_mode=2),
        body(number, size), frame_max,
    )


def declare(port: int, queue: str = QUEUE) -> None:
    """Declare the durable quorum queue *queue* through the broker at *port*
    (a quorum queue's leader is the node it was declared on)."""
    connection = Connection(port)
    connection.call(spec.QueueDeclare(queue=queue, durable=True, arguments=QUORUM), spec.QueueDeclareOk)
    connection.close()


def fill(port: int, first: int, count: int, size: int, queue: str = QUEUE, window: int = 200) -> None:
    """Publish messages *first* .. *first* + *count* - 1 to *queue* with
    confirms (at most *window* unconfirmed); return once all are confirmed."""
    producer = Connection(port)
    producer.call(spec.ConfirmSelect(), spec.ConfirmSelectOk)
    producer.sock.setblocking(False)
    confirms = Confirms()
    selector = selectors.DefaultSelector()
    selector.register(producer.sock, selectors.EVENT_READ)
    published = 0
    outgoing = memoryview(b"")
    while confirms.count < count:
        room = min(window - (published - confirms.count), count - published)
        if not outgoing and room > 0:
            outgoing = memoryview(b"".join(
                publish_frames(first + published + index, size, producer.frame_max, queue) for index in range(room)
            ))
            published += room
        selector.modify(producer.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if outgoing else 0))
        for _, mask in selector.select(5):
            if mask & selectors.EVENT_READ:
                confirms.read(producer.sock)
            if mask & selectors.EVENT_WRITE and outgoing:
                outgoing = outgoing[producer.sock.send(outgoing):]
    selector.close()
    producer.close()


def drain(port: int, queue: str = QUEUE) -> list[int]:
    """Consume everything *queue* holds now (acknowledging it); the numbers
    of the messages received, in order."""
    consumer = Connection(port, timeout=WAIT)
    waiting = consumer.call(spec.QueueDeclare(queue=queue, passive=True), spec.QueueDeclareOk).message_count
    consumer.call(spec.BasicQos(prefetch_count=1000), spec.BasicQosOk)
    # Not call(): deliveries follow the consume-ok at once, and are read below.
    consumer.send(1, spec.BasicConsume(queue=queue, consumer_tag="drain"))
    received: list[int] = []
    buffer = bytearray()
    last_tag = acked = 0
    while len(received) < waiting:
        data = consumer.sock.recv(1 << 20)
        if not data:
            raise RuntimeError("the broker closed the draining consumer's connection")
        buffer += data
        position = 0
        while len(buffer) - position >= 7:
            frame_type, _channel, length = _FRAME_HEADER.unpack_from(buffer, position)
            end = position + 8 + length
            if end > len(buffer):
                break
            payload = position + 7
            if frame_type == 1 and struct.unpack_from(">HH", buffer, payload) == _DELIVER:
                last_tag = struct.unpack_from(">Q", buffer, payload + 4 + 1 + len("drain"))[0]
            elif frame_type == 3:
                received.append(_ID.unpack_from(buffer, payload)[0])
            position = end
        del buffer[:position]
        if last_tag - acked >= 500 or len(received) >= waiting:
            consumer.sock.sendall(_ACK.pack(1, 1, 13, 60, 80, last_tag, 1, 0xCE))
            acked = last_tag
    consumer.close()
    return received


# -- a client that publishes through failures ------------------------------------


@dataclass
class Confirmed:
    """A message a :class:`Prober` published and saw confirmed (monotonic seconds)."""

    number: int
    published: float
    confirmed: float


class Prober(threading.Thread):
    """Publishes persistent messages to *queue* one at a time and waits for
    each confirm, through the first address of *ports* that takes it; when
    its connection ends it tries the next one (every :data:`RETRY` seconds),
    as a client given several addresses does.

    :param first: the number of its first message (numbers go up by one).
    """

    def __init__(self, ports: list[int], first: int, size: int, queue: str = QUEUE) -> None:
        super().__init__(daemon=True, name=f"prober {ports}")
        self.ports = ports
        self.next_number = first
        self.size = size
        self.queue = queue
        self.confirmed: list[Confirmed] = []
        self._stopping = threading.Event()

    def run(self) -> None:
        index = 0
        while not self._stopping.is_set():
            try:
                self._publish_on(Connection(self.ports[index], timeout=WAIT))
            except (OSError, RuntimeError):
                index = (index + 1) % len(self.ports)
                self._stopping.wait(RETRY)

    def _publish_on(self, connection: Connection) -> None:
        """Publish and wait for confirms on *connection* until it fails or the prober stops."""
        try:
            connection.call(spec.ConfirmSelect(), spec.ConfirmSelectOk)
            while not self._stopping.is_set():
                number = self.next_number
                self.next_number += 1
                published = time.monotonic()
                connection.sock.sendall(publish_frames(number, self.size, connection.frame_max, self.queue))
                connection.expect(spec.BasicAck, 1)
                self.confirmed.append(Confirmed(number, published, time.monotonic()))
        finally:
            connection.close()

    def stop(self) -> None:
        """Stop publishing (the message in flight, if any, stays unconfirmed)."""
        self._stopping.set()
        self.join(WAIT)

    def first_after(self, moment: float, timeout: float = WAIT) -> float:
        """Seconds from *moment* to the first confirm of a message published
        after it (waiting for one at most *timeout* seconds)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for confirmed in self.confirmed:
                if confirmed.published > moment:
                    return confirmed.confirmed - moment
            time.sleep(RETRY)
        raise RuntimeError(f"no message published to {self.ports} was confirmed within {timeout} s")

    def confirms_after(self, moment: float) -> int:
        """How many confirms arrived after *moment*."""
        return sum(confirmed.confirmed > moment for confirmed in self.confirmed)

    def warm(self) -> None:
        """Start, and return once :data:`WARM_CONFIRMS` messages were confirmed."""
        self.start()
        wait_until(lambda: len(self.confirmed) >= WARM_CONFIRMS, f"{WARM_CONFIRMS} confirms from {self.ports}")


def listening_from(port: int) -> float:
    """When (monotonic seconds) the AMQP port *port* of 127.0.0.1 accepts
    a connection, looking every :data:`LISTEN_POLL` seconds."""
    address = [Address("amqp", "127.0.0.1", port)]
    wait_until(lambda: listening(address, 1.0) is Listening.YES, f"a listener on port {port}", interval=LISTEN_POLL)
    return time.monotonic()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT, interval: float = RETRY) -> None:
    """Return once *condition()* holds (looking every *interval* seconds)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"not within {timeout} s: {what}")
        time.sleep(interval)


# -- the figures -------------------------------------------------------------------


@dataclass
class Throughput:
    """One throughput run; for this broker, its store's commits during it:
    milliseconds per commit, and messages written per commit (a message
    consumed before its batch is written is never written)."""

    broker: str
    body_size: int
    messages: int
    seconds: float
    commit_ms: Optional[float] = None
    written_per_commit: Optional[float] = None

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


@dataclass
class Failover:
    """One failure: how long until a client's publishing was confirmed again,
    and what the queue held afterwards."""

    broker: str
    scenario: str
    seconds: float
    confirmed: int = 0
    received: int = 0
    lost: int = 0
    duplicates: int = 0
    notes: dict[str, Any] = field(default_factory=dict)


def account(figure: Failover, confirmed: set[int], received: list[int]) -> Failover:
    """*figure* with the counts of *confirmed* messages and those *received* by the drain."""
    figure.confirmed = len(confirmed)
    figure.received = len(received)
    figure.lost = len(confirmed - set(received))
    figure.duplicates = len(received) - len(set(received))
    return figure


def numbers(*probers: Prober) -> set[int]:
    """The numbers of the messages the *probers* saw confirmed."""
    return {confirmed.number for prober in probers for confirmed in prober.confirmed}


# -- this broker's group -----------------------------------------------------------


@dataclass(frozen=True)
class Commits:
    """A member's store commits so far, from its ``/metrics``
    (``txamqp09_store_commit_seconds`` and ``txamqp09_store_batch_messages``)."""

    count: float
    seconds: float
    messages: float

    @classmethod
    def scrape(cls, port: int) -> Commits:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=WAIT) as answer:
            samples = dict(
                line.rsplit(" ", 1) for line in answer.read().decode().splitlines()
                if line.startswith(("txamqp09_store_commit_seconds_", "txamqp09_store_batch_messages_sum"))
            )
        return cls(float(samples["txamqp09_store_commit_seconds_count"]),
                   float(samples["txamqp09_store_commit_seconds_sum"]),
                   float(samples["txamqp09_store_batch_messages_sum"]))

    def since(self, before: Commits) -> tuple[Optional[float], Optional[float]]:
        """Milliseconds per commit and messages written per commit since *before*."""
        count = self.count - before.count
        if not count:
            return None, None
        return (self.seconds - before.seconds) * 1000 / count, (self.messages - before.messages) / count


class Member:
    """A member of the group: ``twistd amqp09 --store URL --node-name NAME``
    on a port chosen before it starts, its log in its own file.

    :param lease: ``--lease-period`` and ``--lease-renew``.
    """

    def __init__(self, base_dir: str, url: str, name: str, lease: tuple[float, float]) -> None:
        self.name = name
        data_dir = os.path.join(base_dir, name)
        os.makedirs(data_dir, exist_ok=True)
        self.log = os.path.join(base_dir, f"{name}-{time.monotonic_ns()}.log")
        self.metrics_port = free_port()
        self.broker = Txamqp09Broker(
            data_dir, ("--store", url, "--node-name", name,
                       "--lease-period", str(lease[0]), "--lease-renew", str(lease[1]),
                       "--prometheus", f"tcp:{self.metrics_port}:interface=127.0.0.1"),
            log=self.log, wait=False,
        )
        self.port = self.broker.port
        self.pid = self.broker.pid

    def logged(self, text: str) -> bool:
        """Whether the member has logged *text*."""
        return text in self.output()

    def output(self) -> str:
        """What the member has logged so far."""
        with open(self.log, errors="replace") as log:
            return log.read()

    def restore_seconds(self) -> Optional[float]:
        """How long its last restore from the store took, as it logged it."""
        found = _RESTORED.findall(self.output())
        return float(found[-1]) if found else None

    def wait_for(self, text: str) -> None:
        """Return once the member logged *text*."""
        wait_until(lambda: self.logged(text) or self.broker.exit_status(0) is not None, f"{self.name}: {text}")
        if not self.logged(text):
            raise RuntimeError(f"{self.name} exited before logging {text!r}:\n{self.output()[-3000:]}")


class Group:
    """Two members on a PostgreSQL primary and its synchronous standby.

    :ivar active: the member that serves.
    :ivar standby: the other one.
    """

    name = "txamqp09"

    def __init__(self, base_dir: str, lease: tuple[float, float]) -> None:
        self.base_dir = base_dir
        self.lease = lease
        self.primary = PostgreSQL(os.path.join(base_dir, "primary"))
        self.primary.start()
        self.replica = self.primary.add_standby(os.path.join(base_dir, "replica"))
        self.primary.make_synchronous()
        database = self.primary.new_database().rsplit("/", 1)[1]
        self.url = group_url([self.primary, self.replica], database)
        self.active = self._member("node-a", "accepting connections on")
        self.standby = self._member("node-b", "group role standby")

    def _member(self, name: str, ready: str) -> Member:
        member = Member(os.path.join(self.base_dir, "brokers"), self.url, name, self.lease)
        member.wait_for(ready)
        return member

    def throughput_port(self) -> int:
        return self.active.port

    def commits(self) -> Commits:
        """The active member's store commits so far."""
        return Commits.scrape(self.active.metrics_port)

    def took_over(self) -> None:
        """The standby serves now; the former active (killed or fenced) is
        started again as the new standby."""
        self.standby.wait_for("group role active")
        self.active, self.standby = self.standby, self._member(self.active.name, "group role standby")

    def stop(self) -> None:
        for member in (self.standby, self.active):
            if member.broker.exit_status(0) is None:
                member.broker.stop()
        for server in (self.replica, self.primary):
            server.remove()


def group_kill(group: Group, backlog: int, size: int) -> Failover:
    """kill -9 of the active with *backlog* messages queued: the first
    confirm after it, when the standby listened, its restore time."""
    declare(group.active.port)
    fill(group.active.port, 0, backlog, size)
    prober = Prober([group.active.port, group.standby.port], backlog, size)
    prober.warm()
    with ThreadPoolExecutor(1) as pool:
        listened = pool.submit(listening_from, group.standby.port)
        failed = time.monotonic()
        os.kill(group.active.pid, signal.SIGKILL)
        seconds = prober.first_after(failed)
        listening_seconds = listened.result(WAIT) - failed
    wait_until(lambda: prober.confirms_after(failed) >= WARM_CONFIRMS, "confirms after the takeover")
    prober.stop()
    group.took_over()
    confirmed = numbers(prober) | set(range(backlog))
    figure = Failover(group.name, f"kill -9 of the active, {backlog:,} queued", seconds, notes={
        "listening_seconds": round(listening_seconds, 3), "restore_seconds": group.active.restore_seconds(),
    })
    return account(figure, confirmed, drain(group.active.port))


def group_hang(group: Group, size: int) -> Failover:
    """SIGSTOP of the active for :data:`HANG_SECONDS`, then SIGCONT: the
    standby serves; the woken broker confirms nothing and exits fenced."""
    hung = group.active
    declare(hung.port)
    old_client = Prober([hung.port], 0, size)
    old_client.warm()
    new_client = Prober([group.standby.port], 1 << 40, size)
    stopped = time.monotonic()
    os.kill(hung.pid, signal.SIGSTOP)
    new_client.start()
    seconds = new_client.first_after(stopped)
    time.sleep(max(stopped + HANG_SECONDS - time.monotonic(), 0))
    resumed = time.monotonic()
    os.kill(hung.pid, signal.SIGCONT)
    status = hung.broker.exit_status(WAIT)
    old_client.stop()
    new_client.stop()
    group.took_over()
    figure = Failover(group.name, f"SIGSTOP of the active for {HANG_SECONDS:g} s", seconds, notes={
        "woken_broker_confirms": old_client.confirms_after(resumed),
        "woken_broker_exit_status": status,
    })
    return account(figure, numbers(old_client, new_client), drain(group.active.port))


def group_database_failover(group: Group, size: int) -> Failover:
    """kill -9 of the PostgreSQL primary and promotion of its standby (the
    active broker carries on if it renews its lease in time; else it is
    fenced and the standby takes over, and the client follows)."""
    declare(group.active.port)
    prober = Prober([group.active.port, group.standby.port], 0, size)
    prober.warm()
    failed = time.monotonic()
    crash(group.primary)
    group.replica.promote()
    promoted = time.monotonic() - failed
    seconds = prober.first_after(failed)
    wait_until(lambda: prober.confirms_after(failed) >= WARM_CONFIRMS, "confirms after the promotion")
    prober.stop()
    fenced = group.active.broker.exit_status(0) is not None
    if fenced:
        group.took_over()
    figure = Failover(group.name, "kill -9 of the PostgreSQL primary + promotion", seconds,
                      notes={"promotion_seconds": round(promoted, 3), "active_fenced": fenced})
    return account(figure, numbers(prober), drain(group.active.port))


def crash(server: PostgreSQL) -> None:
    """SIGKILL of every process of *server* at once, as the loss of its
    machine: the postmaster's backends would otherwise go on serving their
    sessions for a moment (and commit) after the postmaster's own death."""
    assert server.pid is not None
    for pid in _process_tree(server.pid):
        os.kill(pid, signal.SIGKILL)
    server.kill()


# -- RabbitMQ's cluster ---------------------------------------------------------


class Cluster:
    """RabbitMQ's 3-node cluster; the throughput queue's leader is on the first node."""

    name = "rabbitmq"

    def __init__(self, base_dir: str) -> None:
        self.cluster = RabbitMQCluster(os.path.join(base_dir, "rabbitmq"), size=3)
        self.cluster.start()
        self.nodes: list[RabbitMQ] = self.cluster.nodes
        declare(self.nodes[0].port)

    def throughput_port(self) -> int:
        return self.nodes[0].port

    def commits(self) -> None:
        """Nothing: RabbitMQ's metrics are not scraped here."""
        return None

    def stop(self) -> None:
        self.cluster.stop()


def cluster_hang(cluster: Cluster, size: int) -> Failover:
    """SIGSTOP of the leader's node for :data:`HANG_SECONDS`, a client on another node."""
    leader, survivor = cluster.nodes[0], cluster.nodes[1]
    queue = "bench-ha-hang"
    declare(leader.port, queue)
    pid = leader.os_pid()
    prober = Prober([survivor.port], 0, size, queue)
    prober.warm()
    stopped = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    try:
        seconds = prober.first_after(stopped)
        time.sleep(max(stopped + HANG_SECONDS - time.monotonic(), 0))
    finally:
        os.kill(pid, signal.SIGCONT)
    prober.stop()
    figure = Failover(cluster.name, f"SIGSTOP of the leader's node for {HANG_SECONDS:g} s", seconds)
    return account(figure, numbers(prober), drain(survivor.port, queue))


def cluster_kill(cluster: Cluster, backlog: int, size: int) -> Failover:
    """kill -9 of the leader's node with *backlog* messages queued, a client on another node."""
    leader, survivor = cluster.nodes[0], cluster.nodes[1]
    queue = "bench-ha-kill"
    declare(leader.port, queue)
    fill(leader.port, 0, backlog, size, queue)
    pid = leader.os_pid()
    prober = Prober([survivor.port], backlog, size, queue)
    prober.warm()
    failed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    seconds = prober.first_after(failed)
    wait_until(lambda: prober.confirms_after(failed) >= WARM_CONFIRMS, "confirms after the leader's death")
    prober.stop()
    confirmed = numbers(prober) | set(range(backlog))
    return account(Failover(cluster.name, f"kill -9 of the leader's node, {backlog:,} queued", seconds),
                   confirmed, drain(survivor.port, queue))


# -- the run ---------------------------------------------------------------------------


def throughput(systems: list[Any], sizes: list[int], messages: int, repeat: int) -> list[Throughput]:
    """The fastest of *repeat* runs per system and body size (runs alternate between systems)."""
    for system in systems:
        run(system.throughput_port(), min(messages // 10, 10_000), 1024, 200, 200, 50, QUORUM)  # warm-up
    best: dict[tuple[str, int], Throughput] = {}
    for _ in range(repeat):
        for size in sizes:
            for system in systems:
                before = system.commits()
                seconds = run(system.throughput_port(), messages, size, 200, 200, 50, QUORUM)
                result = Throughput(system.name, size, messages, seconds)
                if before is not None:
                    result.commit_ms, result.written_per_commit = system.commits().since(before)
                print(f"{system.name:<9} {size:>5} B {result.rate:>9,.0f} msg/s", file=sys.stderr)
                key = (system.name, size)
                if key not in best or seconds < best[key].seconds:
                    best[key] = result
    return [best[(system.name, size)] for size in sizes for system in systems]


def report(rates: list[Throughput], failovers: list[Failover], load: tuple[float, ...], end: tuple[float, ...]) -> str:
    """The figures as tables; *load* and *end*: the load averages at the start and at the end."""
    lines = throughput_lines(rates)
    if lines:
        lines.append("")
    lines.append(f"{'failure':<48} {'broker':<9} {'seconds':>7} {'confirmed':>9} {'received':>9} "
                 f"{'lost':>5} {'dup':>5}")
    for failover in failovers:
        lines.append(f"{failover.scenario:<48} {failover.broker:<9} {failover.seconds:>7.3f} "
                     f"{failover.confirmed:>9,} {failover.received:>9,} {failover.lost:>5} {failover.duplicates:>5}"
                     + (f"  {failover.notes}" if failover.notes else ""))
    lines.append(f"load average at the start: {' '.join(f'{value:.2f}' for value in load)}; "
                 f"at the end: {' '.join(f'{value:.2f}' for value in end)}")
    return "\n".join(lines)


def throughput_lines(rates: list[Throughput]) -> list[str]:
    """The throughput table and the ratios of the brokers' rates (none without rates)."""
    if not rates:
        return []
    lines = [f"{'throughput':<34} {'broker':<9} {'msg/s':>9}  {'ms/commit':>9} {'written/commit':>14}"]
    by_key = {(rate.broker, rate.body_size): rate for rate in rates}
    for rate in rates:
        commits = (f"  {rate.commit_ms:>9.2f} {rate.written_per_commit:>14.1f}"
                   if rate.commit_ms is not None and rate.written_per_commit is not None else "")
        lines.append(f"{f'persistent {rate.body_size} B, confirms, acks':<34} {rate.broker:<9} {rate.rate:>9,.0f}"
                     + commits)
    for size in sorted({rate.body_size for rate in rates}):
        ours, theirs = by_key.get(("txamqp09", size)), by_key.get(("rabbitmq", size))
        if ours and theirs:
            lines.append(f"{size} B: txamqp09 group / rabbitmq cluster = {ours.rate / theirs.rate:.2f}x")
    return lines


def scenarios(systems: list[Any], options: argparse.Namespace) -> Iterator[Failover]:
    """Each system's failures, in an order that leaves the next one a whole
    system (the database's failure last); with ``--only takeover``, the
    group's kill -9 of the active ``--repeat`` times."""
    for system in systems:
        if options.only == "takeover":
            for _ in range(options.repeat):
                yield group_kill(system, options.backlog, options.body_size)
        elif isinstance(system, Group):
            yield group_kill(system, options.backlog, options.body_size)
            yield group_hang(system, options.body_size)
            yield group_database_failover(system, options.body_size)
        else:
            yield cluster_hang(system, options.body_size)
            yield cluster_kill(system, options.backlog, options.body_size)


def systems_to_run(stack: ExitStack, base_dir: str, options: argparse.Namespace) -> list[Any]:
    """The group and the cluster (or the one named by ``--only``: the group
    for ``takeover``), stopped when *stack* closes."""
    systems: list[Any] = []
    only = "txamqp09" if options.only == "takeover" else options.only
    for name, missing, make in (
        ("txamqp09", psycopg_missing, lambda: Group(base_dir, (options.lease_period, options.lease_renew))),
        ("rabbitmq", rabbitmq_missing, lambda: Cluster(base_dir)),
    ):
        if only not in (None, name):
            continue
        why = missing()
        if why:
            print(f"{name} skipped: {why}", file=sys.stderr)
            continue
        system = make()
        stack.callback(system.stop)
        systems.append(system)
    return systems


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="messages per throughput run")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 16], help="body sizes of the throughput runs")
    parser.add_argument("--repeat", type=int, default=1,
                        help="throughput runs per broker and size, the fastest counts (--only takeover: takeovers)")
    parser.add_argument("--backlog", type=int, default=100_000, help="messages queued when the active is killed")
    parser.add_argument("--body-size", type=int, default=1024, help="bytes per message of the failover scenarios")
    parser.add_argument("--lease-period", type=float, default=3.0, help="the group's --lease-period")
    parser.add_argument("--lease-renew", type=float, default=1.0, help="the group's --lease-renew")
    parser.add_argument("--only", choices=("txamqp09", "rabbitmq", "takeover"),
                        help="measure one broker, or the group's kill -9 of the active alone (no throughput)")
    parser.add_argument("--no-failover", action="store_true", help="throughput only")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    options = parser.parse_args(argv)
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-ha-") as base_dir, ExitStack() as stack:
        os.chmod(base_dir, 0o755)
        systems = systems_to_run(stack, base_dir, options)
        rates = [] if options.only == "takeover" else throughput(systems, options.sizes, options.messages, options.repeat)
        failovers = [] if options.no_failover else list(scenarios(systems, options))
    end = os.getloadavg()
    if options.json:
        print(json.dumps({
            "throughput": [{**asdict(rate), "rate": rate.rate} for rate in rates],
            "failover": [asdict(failover) for failover in failovers],
            "load": load,
            "load_at_end": end,
        }))
    else:
        print(report(rates, failovers, load, end))


if __name__ == "__main__":
    main()
