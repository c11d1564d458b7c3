"""Unfinished messages against the memory alarm.

Starts ``twistd amqp09 --transient --memory-high-watermark 768MiB``, queues
2,000 messages of 1 KiB, then opens 40 connections logged in as guest that
each publish a 127 MiB message and never send its last body frame (they
write as fast as the broker reads; once the memory alarm blocks them, TCP
holds their writes). Meanwhile a consumer on another connection drains the
2,000 queued messages. Then the 40 clients close, the broker's resident
memory is followed for 20 s, and a publish in confirm mode is made.

Printed: the broker's peak resident memory (its VmHWM), the memory when the
flood stalled, how long the drain took, the memory each second after the
clients closed and the first time it was at most 300 MiB, whether the
confirmed publish was acked, and the load average.

Run::

    python bench/unfinished.py
    python bench/unfinished.py --clients 40 --body-size 127MiB --watermark 768MiB
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import threading
import time
from typing import Optional

from broker import Connection, _counter, rss_kib
from startup import start

from txamqp09.units import format_size, parse_size
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.frames import FRAME_OVERHEAD, content_frames

QUEUE = "unfinished-drain"
#: The flood has stalled once no client wrote anything for this long.
_STALL_SECONDS = 3.0
_MIB = 1024 * 1024


def peak_kib(pid: int) -> int:
    """The peak resident memory of *pid* (VmHWM), in KiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc status")


class UnfinishedPublisher(threading.Thread):
    """Publishes one message of *body_size* bytes without its last body frame."""

    def __init__(self, port: int, body_size: int) -> None:
        super().__init__(daemon=True)
        self.connection = Connection(port)
        self.body_size = body_size
        self.sent = 0

    def run(self) -> None:
        frame_max = self.connection.frame_max
        chunk = frame_max - FRAME_OVERHEAD
        head = content_frames(
            1, spec.BasicPublish(exchange="", routing_key=QUEUE), spec.BasicProperties(), b"", frame_max
        )
        # content_frames of an empty body announce size 0: patch in the real size
        # (after the method frame, the header frame's 7-byte head, class id and weight).
        size_at = 7 + int.from_bytes(head[3:7], "big") + 1 + 7 + 4
        head = head[:size_at] + self.body_size.to_bytes(8, "big") + head[size_at + 8 :]
        body_frame = bytes((3, 0, 1)) + chunk.to_bytes(4, "big") + b"x" * chunk + b"\xce"
        try:
            self.connection.sock.sendall(head)
            for _ in range(self.body_size // chunk - 1):
                self.connection.sock.sendall(body_frame)
                self.sent += chunk
        except OSError:
            return  # closed by the run

    def close(self) -> None:
        """Close the socket; the writing thread, stuck in sendall, wakes with an error."""
        try:
            self.connection.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.connection.close()
        self.join()


def drain(port: int, messages: int) -> float:
    """Consume *messages* from the queue (acking each): the seconds it took."""
    consumer = Connection(port)
    consumer.call(spec.BasicQos(prefetch_count=200), spec.BasicQosOk)
    consumer.send(1, spec.BasicConsume(queue=QUEUE, consumer_tag="drain"))
    consumer.sock.setblocking(False)
    count = _counter(False, consumer.sock)
    selector = selectors.DefaultSelector()
    selector.register(consumer.sock, selectors.EVENT_READ)
    started = time.monotonic()
    received = 0
    while received < messages:
        for _key, _events in selector.select(1):
            received += count()
        if time.monotonic() - started > 120:
            raise RuntimeError(f"the consumer got {received} of {messages} messages in 120 s")
    selector.close()
    consumer.close()
    return time.monotonic() - started


def confirmed_publish(port: int) -> bool:
    """Publish one message in confirm mode; whether the broker acked it."""
    publisher = Connection(port)
    publisher.call(spec.ConfirmSelect(), spec.ConfirmSelectOk)
    publisher.sock.sendall(
        content_frames(1, spec.BasicPublish(exchange="", routing_key=QUEUE), spec.BasicProperties(),
                       b"after", publisher.frame_max)
    )
    ack = publisher.expect(spec.BasicAck, 1)
    publisher.close()
    return bool(ack.delivery_tag == 1)


def run(clients: int, body_size: int, watermark: str, queued: int, after: float) -> None:
    process, port, _, _ = start("--transient", "--memory-high-watermark", watermark)
    pid = process.pid
    try:
        setup = Connection(port)
        setup.call(spec.QueueDeclare(queue=QUEUE), spec.QueueDeclareOk)
        setup.sock.sendall(
            content_frames(1, spec.BasicPublish(exchange="", routing_key=QUEUE), spec.BasicProperties(),
                           b"q" * 1024, setup.frame_max) * queued
        )
        setup.call(spec.QueueDeclare(queue=QUEUE, passive=True), spec.QueueDeclareOk)
        setup.close()
        print(f"broker at start: {rss_kib(pid) // 1024} MiB resident, {queued} messages queued")

        publishers = [UnfinishedPublisher(port, body_size) for _ in range(clients)]
        for publisher in publishers:
            publisher.start()
        last_total, last_change = -1, time.monotonic()
        while time.monotonic() - last_change < _STALL_SECONDS:
            time.sleep(0.2)
            total = sum(publisher.sent for publisher in publishers)
            if total != last_total:
                last_total, last_change = total, time.monotonic()
        print(
            f"flood stalled: clients wrote {last_total // _MIB} MiB in all; broker "
            f"{rss_kib(pid) // 1024} MiB resident, peak so far {peak_kib(pid) // 1024} MiB"
        )
        seconds = drain(port, queued)
        print(f"consumer on another connection drained {queued} messages in {seconds:.2f} s")

        for publisher in publishers:
            publisher.close()
        closed = time.monotonic()
        low: Optional[float] = None
        samples = []
        while time.monotonic() - closed < after:
            time.sleep(0.1)
            resident = rss_kib(pid) // 1024
            elapsed = time.monotonic() - closed
            if low is None and resident <= 300:
                low = elapsed
            if not samples or elapsed >= len(samples):
                samples.append(resident)
        print("after the clients closed, MiB resident each second: " + " ".join(map(str, samples)))
        print(
            f"at most 300 MiB after {low:.1f} s" if low is not None else "never at most 300 MiB"
        )
        print(f"confirmed publish afterwards: {'acked' if confirmed_publish(port) else 'NOT acked'}")
        print(f"peak resident memory of the broker (VmHWM): {peak_kib(pid) // 1024} MiB")
        print("load average: " + " ".join(f"{load:.2f}" for load in os.getloadavg()))
    finally:
        process.terminate()
        process.wait(30)


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=40, help="unfinished publishers")
    parser.add_argument("--body-size", type=parse_size, default=127 * _MIB, help="size each announces")
    parser.add_argument("--watermark", default="768MiB", help="--memory-high-watermark of the broker")
    parser.add_argument("--queued", type=int, default=2000, help="messages the consumer drains")
    parser.add_argument("--after", type=float, default=20.0, help="seconds followed after closing")
    args = parser.parse_args(argv)
    print(
        f"{args.clients} clients x {format_size(args.body_size)} unfinished, "
        f"--memory-high-watermark {args.watermark}"
    )
    run(args.clients, args.body_size, args.watermark, args.queued, args.after)


if __name__ == "__main__":
    main()
