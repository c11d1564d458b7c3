"""The management API's cost: listing many queues, and AMQP throughput while it is polled.

A broker (``twistd amqp09 --management``) with ``--queues`` queues
(10,000 by default) in a subprocess on loopback:

``list``    the time ``GET /api/queues`` takes for every queue (the whole
            list, all fields) and for the first page of 100 sorted by name
            (what the management UI asks for), fastest of ``--repeat``.
``polled``  ``bench/broker.py``'s autoack scenario, once quiet and once while
            another process polls the API once a second (the whole queue
            list, or the first page with ``--poll page``), alternating;
            messages per second and the broker's CPU per message of the
            fastest run of each, and the loss.

Run::

    python bench/management.py
    python bench/management.py --queues 10000 --messages 300000 --repeat 3 --poll page
"""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Optional

from broker import SCENARIOS, Connection, Txamqp09Broker, measure, run_scenario

from txamqp09.testing.rabbitmq import free_port
from txamqp09.wire import _amqp0_9_1 as spec

#: The two requests measured.
WHOLE_LIST = "/api/queues"
FIRST_PAGE = "/api/queues?page=1&page_size=100&sort=name"
_AUTHORIZATION = "Basic " + base64.b64encode(b"guest:guest").decode()
#: The poller: a separate process, so that the load generator is not slowed by it.
_POLLER = """
import sys, time, urllib.request
url, authorization, interval = sys.argv[1], sys.argv[2], float(sys.argv[3])
while True:
    started = time.monotonic()
    request = urllib.request.Request(url, headers={"Authorization": authorization})
    urllib.request.urlopen(request).read()
    print(f"{time.monotonic() - started:.3f}", flush=True)
    time.sleep(max(0.0, interval - (time.monotonic() - started)))
"""


def get(port: int, path: str) -> int:
    """GET *path*; the size of the answer."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": _AUTHORIZATION})
    with urllib.request.urlopen(request, timeout=600) as answer:
        return len(answer.read())


def declare_queues(port: int, count: int) -> None:
    """Declare *count* queues named ``bench-N``."""
    connection = Connection(port)
    for number in range(count):
        connection.call(spec.QueueDeclare(queue=f"bench-{number}"), spec.QueueDeclareOk)
    connection.close()


def time_lists(port: int, repeat: int) -> None:
    """Print the fastest of *repeat* GETs of the whole list and of the first page."""
    for path in (WHOLE_LIST, FIRST_PAGE):
        best: Optional[float] = None
        size = 0
        for _ in range(repeat):
            started = time.perf_counter()
            size = get(port, path)
            elapsed = time.perf_counter() - started
            best = elapsed if best is None else min(best, elapsed)
        print(f"GET {path}: {best:.3f} s, {size:,} bytes")


def polled(
    broker: Txamqp09Broker, http_port: int, path: str, messages: int, repeat: int, interval: float = 1.0
) -> None:
    """The autoack scenario quiet and polled (a GET of *path* every *interval*
    seconds), alternating; print the fastest of each and the GETs' times."""
    scenario = SCENARIOS["autoack"]
    run_scenario(broker.port, scenario, min(messages // 10, 20000), 5000)  # warm-up
    best: dict[str, tuple[float, float]] = {}
    answered: list[float] = []
    for _ in range(repeat):
        for mode in ("quiet", "polled"):
            poller = None
            if mode == "polled":
                poller = subprocess.Popen(
                    [sys.executable, "-c", _POLLER, f"http://127.0.0.1:{http_port}{path}", _AUTHORIZATION,
                     str(interval)], stdout=subprocess.PIPE, text=True)
            try:
                result = measure(broker, scenario, messages, 5000)
            finally:
                gets: list[float] = []
                if poller is not None:
                    poller.terminate()
                    output, _ = poller.communicate(timeout=30)
                    gets = [float(line) for line in output.split()]
                    answered += gets
            print(f"  {mode:<6} {result.rate:>9,.0f} msg/s {result.cpu_us_per_message:6.2f} us CPU/msg"
                  + (f", {len(gets)} GETs in {result.seconds:.1f} s" if poller is not None else ""),
                  file=sys.stderr)
            if mode not in best or result.rate > best[mode][0]:
                best[mode] = (result.rate, result.cpu_us_per_message)
    quiet, loaded = best["quiet"], best["polled"]
    print(f"autoack quiet:  {quiet[0]:,.0f} msg/s, {quiet[1]:.2f} us broker CPU/msg")
    print(f"autoack polled: {loaded[0]:,.0f} msg/s, {loaded[1]:.2f} us broker CPU/msg "
          f"(GET {path} every {interval:g} s, {len(answered)} GETs, slowest {max(answered, default=0):.3f} s)")
    print(f"loss: {100 * (1 - loaded[0] / quiet[0]):.1f} %")


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queues", type=int, default=10_000, help="queues to declare")
    parser.add_argument("--messages", type=int, default=300_000, help="messages per throughput run")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement; the fastest counts")
    parser.add_argument("--poll", choices=("list", "page"), default="list",
                        help="what the poller asks for: the whole queue list or its first page")
    options = parser.parse_args(argv)
    http_port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-management-") as data_dir:
        broker = Txamqp09Broker(
            os.path.join(data_dir, "store"), ("--management", f"tcp:{http_port}:interface=127.0.0.1"))
        try:
            declare_queues(broker.port, options.queues)
            print(f"{options.queues:,} queues; load average {os.getloadavg()[0]:.1f}")
            time_lists(http_port, options.repeat)
            polled(broker, http_port, WHOLE_LIST if options.poll == "list" else FIRST_PAGE,
                   options.messages, options.repeat)
            print(f"load average {os.getloadavg()[0]:.1f}")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
