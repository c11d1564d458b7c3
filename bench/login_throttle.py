"""A correct client's connect latency while another client guesses passwords.

Starts ``twist amqp09 --transient`` on a free loopback port. One client
(pika, user guest with the right password) opens and closes a connection
every second; meanwhile attacker threads in another process on the same
host send wrong passwords (``--guesses`` in all, ``--concurrency``
connections at a time, each waiting for its refusal before the next, for
user ``--user``). The correct client starts ``--baseline`` seconds before
the attack, to show the machine's own noise, and stops when the last guess
is answered.

Run::

    python bench/login_throttle.py                     # 200 guesses for guest, 8 at a time
    python bench/login_throttle.py --concurrency 32    # beyond the broker's 16 per host
    python bench/login_throttle.py --user app

It prints the correct client's connect latencies (baseline and under
attack: median, 99th percentile, slowest, how many took over 50 ms, how
many were refused), how the guesses were answered
(refused and held back, or refused at once because the broker held as many
refusals as it may), how long the attack took, and the load average.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

ROOT = str(Path(__file__).resolve().parents[1])
sys.path.insert(0, ROOT)

from txamqp09.testing.logins import correct_login  # noqa: E402
from txamqp09.testing.rabbitmq import free_port  # noqa: E402
from txamqp09.wire import _amqp0_9_1 as spec  # noqa: E402
from txamqp09.wire.base import decode_method  # noqa: E402
from txamqp09.wire.frames import FRAME_METHOD, FrameReader, method_frame  # noqa: E402

#: What the reply text of a refusal the broker did not hold back says.
_NOT_HELD = "Answered at once:"


def start_broker(port: int) -> subprocess.Popen[bytes]:
    """``twist amqp09 --transient`` on 127.0.0.1:*port*, once it accepts connections."""
    process = subprocess.Popen(
        [sys.executable, "-m", "twisted", "amqp09", "--transient", "--heartbeat", "0",
         "--listen", f"tcp:{port}:interface=127.0.0.1"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the broker exited with status {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.05)
    process.terminate()
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after 30 s")


def guess(port: int, user: str, password: str) -> str:
    """One login with a wrong password: the reply text of the broker's refusal."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        reader = FrameReader(1 << 20)
        sock.sendall(b"AMQP\x00\x00\x09\x01")
        sent = False
        while True:
            data = sock.recv(65536)
            if not data:
                raise RuntimeError("the broker closed the connection without a reply")
            for frame_type, _, payload in reader.feed(data):
                if frame_type != FRAME_METHOD:
                    continue
                method = decode_method(spec.METHODS, payload)
                if isinstance(method, spec.ConnectionStart) and not sent:
                    sock.sendall(method_frame(0, spec.ConnectionStartOk(
                        client_properties={"product": "login_throttle bench"}, mechanism="PLAIN",
                        response=f"\0{user}\0{password}".encode(), locale="en_US")))
                    sent = True
                elif isinstance(method, spec.ConnectionClose):
                    return str(method.reply_text)
                else:
                    raise RuntimeError(f"a wrong password was answered with {method!r}")


@dataclass
class Attack:
    """The attacker threads' shared state."""

    port: int
    user: str
    guesses: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: int = 0
    answers: dict[str, int] = field(default_factory=dict)

    def run_threads(self, concurrency: int, answers: Any) -> None:
        """Guess from *concurrency* threads until every guess is answered;
        put the count of each kind of answer on the queue *answers*."""
        threads = [threading.Thread(target=self.run) for _ in range(concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        answers.put(self.answers)

    def run(self) -> None:
        """Guess until all the guesses are sent (one thread)."""
        while True:
            with self.lock:
                if self.sent == self.guesses:
                    return
                self.sent += 1
                number = self.sent
            text = guess(self.port, self.user, f"wrong-{number}")
            kind = "refused at once (too many refusals held)" if _NOT_HELD in text else "refused, held back"
            with self.lock:
                self.answers[kind] = self.answers.get(kind, 0) + 1


def summary(attempts: list[Optional[float]]) -> str:
    """Median, 99th percentile and slowest of the latencies of *attempts*, in
    milliseconds, and how many were refused (None)."""
    ordered = sorted(latency for latency in attempts if latency is not None)
    refused = len(attempts) - len(ordered)
    if not ordered:
        return f"no connections, {refused} refused"
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    slow = sum(latency > 0.050 for latency in ordered)
    return (f"{len(ordered)} connects: median {statistics.median(ordered) * 1000:.1f} ms, "
            f"p99 {p99 * 1000:.1f} ms, slowest {ordered[-1] * 1000:.1f} ms, {slow} over 50 ms, {refused} refused")


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--guesses", type=int, default=200, help="wrong passwords in all (default 200)")
    parser.add_argument("--concurrency", type=int, default=8, help="attacker connections at a time (default 8)")
    parser.add_argument("--user", default="guest", help="the user the attacker guesses for (default guest)")
    parser.add_argument("--baseline", type=int, default=30, help="correct connects before the attack (default 30)")
    args = parser.parse_args(argv)

    port = free_port()
    broker = start_broker(port)
    try:
        baseline: list[Optional[float]] = []
        for _ in range(args.baseline):
            baseline.append(correct_login(port, "guest", "guest"))
            time.sleep(1.0)
        attack = Attack(port, args.user, args.guesses)
        answers: Any = multiprocessing.Queue()
        attacker = multiprocessing.Process(target=attack.run_threads, args=(args.concurrency, answers))
        started = time.monotonic()
        attacker.start()
        under_attack: list[Optional[float]] = []
        while attacker.is_alive():
            under_attack.append(correct_login(port, "guest", "guest"))
            time.sleep(1.0)
        attack_seconds = time.monotonic() - started
        attack.answers = answers.get()
        attacker.join()
    finally:
        broker.terminate()
        broker.wait(30)

    print(f"attack: {args.guesses} wrong passwords for {args.user!r} from 127.0.0.1, "
          f"{args.concurrency} at a time, answered in {attack_seconds:.1f} s")
    for kind, count in sorted(attack.answers.items()):
        print(f"  {kind}: {count}")
    print(f"correct client (guest, right password), baseline: {summary(baseline)}")
    print(f"correct client under attack:                       {summary(under_attack)}")
    print("load average: " + " ".join(f"{load:.2f}" for load in os.getloadavg()))


if __name__ == "__main__":
    main()
