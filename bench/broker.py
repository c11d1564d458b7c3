"""Broker throughput: this project's broker next to RabbitMQ, in the same run.

One producer and one consumer on loopback, each on its own connection, in two
scenarios:

``autoack``  16-byte transient messages, consumer with no-ack.
``ack``      1 KiB transient messages, manual ack of every message, prefetch 100.

For each broker the report gives messages per second, the broker's CPU time
per message (user + system, read from ``/proc`` for the broker's process) and
its resident memory after the run. The load generator is a lean raw-socket
client (one process, both connections, pre-encoded publish frames, a bounded
window of messages in flight) so that the broker, not the client, is what is
measured.

Run::

    python bench/broker.py                 # both brokers, both scenarios
    python bench/broker.py --messages 500000 --only txamqp09
    python bench/broker.py --repeat 3      # the fastest of three runs each

Runs alternate between the brokers so that other load on the machine falls
on both alike.
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Optional

from txamqp09.testing.rabbitmq import RabbitMQ, free_port, rabbitmq_missing

#: The source tree the broker runs from.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.base import decode_method
from txamqp09.wire.frames import FRAME_METHOD, FrameReader, content_frames, method_frame

_FRAME_HEADER = struct.Struct(">BHI")
_DELIVER = struct.pack(">HH", 60, 60)
_ACK = struct.Struct(">BHIHHQBB")
_CONSUMER_TAG = "bench"
#: Offset of the delivery tag in a basic.deliver payload with our consumer tag.
_TAG_OFFSET = 4 + 1 + len(_CONSUMER_TAG)
_TAG = struct.Struct(">Q")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Scenario:
    """One workload."""

    name: str
    body_size: int
    no_ack: bool
    prefetch: int


SCENARIOS = {
    "autoack": Scenario("autoack", 16, True, 0),
    "ack": Scenario("ack", 1024, False, 100),
}


@dataclass
class Result:
    """What one scenario measured on one broker."""

    broker: str
    scenario: str
    messages: int
    seconds: float
    cpu_seconds: float
    rss_kib: int

    @property
    def rate(self) -> float:
        return self.messages / self.seconds

    @property
    def cpu_us_per_message(self) -> float:
        return self.cpu_seconds * 1e6 / self.messages


# -- the broker processes ------------------------------------------------------


def _process_tree(pid: int) -> list[int]:
    """*pid* and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending.extend(children.get(current, []))
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of *pid* and its descendants."""
    total = 0
    for each in _process_tree(pid):
        try:
            with open(f"/proc/{each}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / _CLOCK_TICKS


def rss_kib(pid: int) -> int:
    """Resident memory of *pid* and its descendants, in KiB."""
    total = 0
    for each in _process_tree(pid):
        try:
            with open(f"/proc/{each}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the broker exited with status {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


class Txamqp09Broker:
    """``twistd -n amqp09`` in a subprocess on a free loopback port.

    :param data_dir: the message store's directory (the run's own), or None
        for a broker started with ``--transient`` in *options*.
    :param options: more ``twistd amqp09`` options.
    :param log: a file the broker's log is appended to (none kept if omitted).
    :param wait: return once the broker listens (a standby of a group does not).
    """

    name = "txamqp09"

    def __init__(
        self, data_dir: Optional[str], options: tuple[str, ...] = (), log: Optional[str] = None, wait: bool = True,
    ) -> None:
        self.port = free_port()
        with open(log or os.devnull, "ab") as output:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "twisted", "--log-format", "text", "amqp09", "--listen",
                 f"tcp:{self.port}:interface=127.0.0.1", "--heartbeat", "0",
                 *(("--data-dir", data_dir) if data_dir is not None else ()), *options],
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env={**os.environ, "PYTHONPATH": ROOT, "PYTHONUNBUFFERED": "1"},  # a killed broker's log is whole
            )
        if wait:
            _wait_for_port(self.port, self._process)
        self.pid = self._process.pid

    def stop(self) -> None:
        self._process.terminate()
        self._process.wait(30)

    def kill(self) -> None:
        """SIGKILL, and wait for the process to end."""
        self._process.kill()
        self._process.wait(30)

    def exit_status(self, timeout: float) -> Optional[int]:
        """The process's exit status once it ends within *timeout* seconds (None if it does not)."""
        try:
            return self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


class RabbitMQBroker:
    """A private RabbitMQ node (see :mod:`txamqp09.testing.rabbitmq`).

    :param config: ``rabbitmq.conf`` settings, key to value.
    """

    name = "rabbitmq"

    def __init__(self, base_dir: str, config: Mapping[str, str] = {}) -> None:
        self._node = RabbitMQ(base_dir, config=config)
        self._node.start()
        self.port = self._node.port
        self.pid = self._node.os_pid()

    def stop(self) -> None:
        self._node.stop()


# -- the load generator -------------------------------------------------------


class Connection:
    """A blocking AMQP 0-9-1 connection for set-up, then raw frames.

    :param timeout: seconds any one read or write may wait (None: for ever).
    """

    def __init__(self, port: int, timeout: Optional[float] = None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._reader = FrameReader(1 << 20)
        self._pending: list[Any] = []
        self.sock.sendall(b"AMQP\x00\x00\x09\x01")
        self.expect(spec.ConnectionStart, 0)
        self.send(0, spec.ConnectionStartOk(
            client_properties={"product": "txamqp09 bench"}, mechanism="PLAIN",
            response=b"\x00guest\x00guest", locale="en_US"))
        tune = self.expect(spec.ConnectionTune, 0)
        self.frame_max = min(tune.frame_max or 131072, 131072)
        self.send(0, spec.ConnectionTuneOk(channel_max=1, frame_max=self.frame_max, heartbeat=0))
        self.send(0, spec.ConnectionOpen(virtual_host="/"))
        self.expect(spec.ConnectionOpenOk, 0)
        self.send(1, spec.ChannelOpen())
        self.expect(spec.ChannelOpenOk, 1)

    def send(self, channel: int, method: Any) -> None:
        self.sock.sendall(method_frame(channel, method))

    def expect(self, cls: type, channel: int) -> Any:
        while True:
            while self._pending:
                frame_type, number, payload = self._pending.pop(0)
                if frame_type == FRAME_METHOD and number == channel:
                    method = decode_method(spec.METHODS, payload)
                    if isinstance(method, cls):
                        return method
                    raise RuntimeError(f"expected {cls.NAME}, got {method!r}")
            data = self.sock.recv(65536)
            if not data:
                raise RuntimeError("the broker closed the connection")
            self._pending.extend(self._reader.feed(data))

    def call(self, method: Any, answer: type) -> Any:
        self.send(1, method)
        return self.expect(answer, 1)

    def close(self) -> None:
        self.sock.close()


def run_scenario(port: int, scenario: Scenario, messages: int, window: int) -> float:
    """Move *messages* from producer to consumer; the seconds it took."""
    producer, consumer = Connection(port), Connection(port)
    queue = consumer.call(spec.QueueDeclare(queue="", exclusive=True), spec.QueueDeclareOk).queue
    if scenario.prefetch:
        consumer.call(spec.BasicQos(prefetch_count=scenario.prefetch), spec.BasicQosOk)
    consumer.call(
        spec.BasicConsume(queue=queue, consumer_tag=_CONSUMER_TAG, no_ack=scenario.no_ack),
        spec.BasicConsumeOk,
    )
    one = content_frames(
        1, spec.BasicPublish(exchange="", routing_key=queue), spec.BasicProperties(),
        b"x" * scenario.body_size, producer.frame_max,
    )
    batch = 200
    burst = one * batch
    for sock in (producer.sock, consumer.sock):
        sock.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(consumer.sock, selectors.EVENT_READ, "consumer")
    selector.register(producer.sock, selectors.EVENT_WRITE, "producer")
    received = published = 0
    count = _counter(scenario.no_ack, consumer.sock)
    outgoing = memoryview(b"")
    started = time.perf_counter()
    while received < messages:
        if not outgoing and published < messages and published - received + batch <= window:
            outgoing = memoryview(burst)
            published += batch
        want_write = selectors.EVENT_WRITE if outgoing else 0
        selector.modify(producer.sock, want_write or selectors.EVENT_READ, "producer")
        for key, _events in selector.select(1):
            if key.data == "consumer":
                received += count()
            elif outgoing:
                outgoing = outgoing[producer.sock.send(outgoing):]
    elapsed = time.perf_counter() - started
    selector.close()
    producer.close()
    consumer.close()
    return elapsed


def _counter(no_ack: bool, sock: socket.socket, ack_every: int = 1) -> Callable[[], int]:
    """A function that reads what arrived and returns how many deliveries it
    completed, acknowledging them (unless *no_ack*): each one, or with
    *ack_every* > 1 every *ack_every*-th delivery with ``multiple``."""
    buffer = bytearray()
    unpack = _FRAME_HEADER.unpack_from
    multiple = int(ack_every > 1)
    unacked = 0

    def count() -> int:
        nonlocal buffer, unacked
        try:
            data = sock.recv(1 << 20)
        except BlockingIOError:
            return 0
        if not data:
            raise RuntimeError("the broker closed the consumer's connection")
        buffer += data
        size = len(buffer)
        pos = 0
        delivered = 0
        acks = []
        while size - pos >= 7:
            frame_type, _channel, length = unpack(buffer, pos)
            end = pos + 8 + length
            if end > size:
                break
            if frame_type == 1 and buffer[pos + 7 : pos + 11] == _DELIVER:
                delivered += 1
                unacked += 1
                if not no_ack and unacked == ack_every:
                    tag = _TAG.unpack_from(buffer, pos + 7 + _TAG_OFFSET)[0]
                    acks.append(_ACK.pack(1, 1, 13, 60, 80, tag, multiple, 0xCE))
                    unacked = 0
            pos = end
        del buffer[:pos]
        if acks:
            sock.setblocking(True)
            sock.sendall(b"".join(acks))
            sock.setblocking(False)
        return delivered

    return count


def measure(broker: Any, scenario: Scenario, messages: int, window: int) -> Result:
    """Run *scenario* once on *broker*; read its CPU time and memory."""
    cpu_before = cpu_seconds(broker.pid)
    seconds = run_scenario(broker.port, scenario, messages, window)
    cpu = cpu_seconds(broker.pid) - cpu_before
    return Result(broker.name, scenario.name, messages, seconds, cpu, rss_kib(broker.pid))


def compare(brokers: list[Any], scenarios: list[Scenario], messages: int, window: int, repeat: int) -> list[Result]:
    """The fastest of *repeat* runs per broker and scenario.

    Runs alternate between the brokers, so that other load on the machine
    falls on both alike.
    """
    for broker in brokers:
        for scenario in scenarios:
            run_scenario(broker.port, scenario, min(messages // 10, 20000), window)  # warm-up
    best: dict[tuple[str, str], Result] = {}
    for _ in range(repeat):
        for scenario in scenarios:
            for broker in brokers:
                result = measure(broker, scenario, messages, window)
                print(report([result]).splitlines()[1], file=sys.stderr)
                key = (broker.name, scenario.name)
                if key not in best or result.seconds < best[key].seconds:
                    best[key] = result
    return [best[(broker.name, scenario.name)] for scenario in scenarios for broker in brokers]


def report(results: list[Result]) -> str:
    """A table of the results, with the ratio of the two brokers' rates."""
    lines = [
        f"{'scenario':<9} {'broker':<9} {'msg/s':>9} {'CPU us/msg':>10} {'RSS MiB':>8}",
    ]
    for result in results:
        lines.append(
            f"{result.scenario:<9} {result.broker:<9} {result.rate:>9,.0f} "
            f"{result.cpu_us_per_message:>10.2f} {result.rss_kib / 1024:>8.1f}"
        )
    by_key = {(r.scenario, r.broker): r for r in results}
    for name in SCENARIOS:
        ours, theirs = by_key.get((name, "txamqp09")), by_key.get((name, "rabbitmq"))
        if ours and theirs:
            lines.append(f"{name}: txamqp09 / rabbitmq = {ours.rate / theirs.rate:.2f}x")
    return "\n".join(lines)


@contextmanager
def running_brokers(base_dir: str, only: Optional[str], options: tuple[str, ...] = ()) -> Iterator[list[Any]]:
    """This project's broker (with more command-line *options*) and RabbitMQ
    (when installed; or only the one named), with their data under
    *base_dir*; stopped on exit."""
    brokers: list[Any] = []
    try:
        if only != "rabbitmq":
            brokers.append(Txamqp09Broker(os.path.join(base_dir, "txamqp09"), options))
        if only != "txamqp09":
            missing = rabbitmq_missing()
            if missing:
                print(f"RabbitMQ skipped: {missing}", file=sys.stderr)
            else:
                brokers.append(RabbitMQBroker(base_dir))
        yield brokers
    finally:
        for broker in brokers:
            broker.stop()


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=300_000, help="messages per scenario")
    parser.add_argument("--window", type=int, default=5000, help="messages in flight at most")
    parser.add_argument("--repeat", type=int, default=1, help="runs per scenario; the fastest counts")
    parser.add_argument("--only", choices=("txamqp09", "rabbitmq"), help="benchmark one broker")
    parser.add_argument("--scenario", choices=tuple(SCENARIOS), action="append",
                        help="run this scenario (repeatable; default: all)")
    options = parser.parse_args(argv)
    scenarios = [SCENARIOS[name] for name in options.scenario or SCENARIOS]
    with tempfile.TemporaryDirectory(prefix="bench-broker-") as base_dir:
        with running_brokers(base_dir, options.only) as brokers:
            results = compare(brokers, scenarios, options.messages, options.window, options.repeat)
    print(report(results))


if __name__ == "__main__":
    main()
