"""The metrics listener's cost: scraping many queues, and AMQP throughput while scraped.

A broker (``twistd amqp09 --prometheus``) with ``--queues`` queues (10,000
by default) in a subprocess on loopback:

``scrape``  the time a scrape of ``/metrics/per-object`` (one sample per
            queue and metric) and of ``/metrics`` (aggregated) takes: the
            first (nothing encoded yet) and the fastest of ``--repeat``
            more (the text of unchanged rows kept), in wall-clock time and
            in the broker's CPU time, with the answer's size.
``scraped`` ``bench/broker.py``'s autoack scenario, once quiet and once
            while another process scrapes ``/metrics/per-object`` every
            ``--interval`` seconds (``--scrape aggregated``: ``/metrics``),
            alternating; messages per second and the broker's CPU per
            message of the fastest run of each, the loss, and how many
            scrapes fell in the runs (give enough ``--messages`` for
            several).

Run::

    python bench/prometheus.py
    python bench/prometheus.py --queues 10000 --messages 2000000 --repeat 3 --interval 5
    python bench/prometheus.py --scrape aggregated --interval 1
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import urllib.request
from typing import Optional

from broker import Txamqp09Broker, cpu_seconds
from management import declare_queues, polled

from txamqp09.testing.rabbitmq import free_port

PATHS = {"per-object": "/metrics/per-object", "aggregated": "/metrics"}


def time_scrapes(broker: Txamqp09Broker, port: int, repeat: int) -> None:
    """Print the first and the fastest of *repeat* more scrapes of each path,
    in wall-clock time and in the broker's CPU time (which a busy machine
    does not inflate as much)."""
    for path in PATHS.values():
        times: list[tuple[float, float]] = []
        size = 0
        for _ in range(repeat + 1):
            started, cpu = time.perf_counter(), cpu_seconds(broker.pid)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=600) as answer:
                size = len(answer.read())
            times.append((time.perf_counter() - started, cpu_seconds(broker.pid) - cpu))
        (first, first_cpu), (then, then_cpu) = times[0], min(times[1:])
        print(f"GET {path}: first {first:.3f} s ({first_cpu:.3f} s broker CPU), "
              f"then {then:.3f} s ({then_cpu:.3f} s broker CPU), {size:,} bytes")


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queues", type=int, default=10_000, help="queues to declare")
    parser.add_argument("--messages", type=int, default=300_000, help="messages per throughput run")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement; the fastest counts")
    parser.add_argument("--scrape", choices=tuple(PATHS), default="per-object",
                        help="what the scraper asks for while the throughput is measured")
    parser.add_argument("--interval", type=float, default=5.0,
                        help="seconds between scrapes (Prometheus' default is 15)")
    options = parser.parse_args(argv)
    metrics_port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-prometheus-") as data_dir:
        broker = Txamqp09Broker(
            os.path.join(data_dir, "store"), ("--prometheus", f"tcp:{metrics_port}:interface=127.0.0.1"))
        try:
            declare_queues(broker.port, options.queues)
            print(f"{options.queues:,} queues; load average {os.getloadavg()[0]:.1f}")
            time_scrapes(broker, metrics_port, options.repeat)
            polled(broker, metrics_port, PATHS[options.scrape], options.messages, options.repeat, options.interval)
            print(f"load average {os.getloadavg()[0]:.1f}")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
