"""Time the message store takes to open and recover a backlog of persistent messages.

Fills a store with N persistent messages on one durable queue (as
``bench/startup.py`` does), then opens it again, as a broker start does, and reports the
seconds the store's ``open`` took (wall clock and this process's CPU) with
or without a body budget. With ``--data-dir`` and ``--keep`` a filled SQLite
store is reused (only the opening is measured again); ``--store`` names
another store (a PostgreSQL database, filled first, left filled)::

    python bench/recovery.py                          # 1,000,000 messages of 100 B, 1 queue
    python bench/recovery.py --messages 200000 --body-size 1024
    python bench/recovery.py --budget 16777216        # bodies beyond 16 MiB left on disk
    python bench/recovery.py --messages 100000 --body-size 1024 --store postgresql://postgres@127.0.0.1:5432/amqp
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Optional, cast

from startup import add_backlog_options, fill, filled_store

from twisted.internet.interfaces import IReactorFromThreads
from txamqp09.store.url import store_from_url


def recover(url: str, budget: Optional[int]) -> tuple[float, float, int]:
    """Open the store *url* names once: (wall seconds, CPU seconds, messages recovered).

    The store is left open, its writer thread (a daemon) waiting: the process ends after."""
    from twisted.internet import reactor

    store = store_from_url(url, cast(IReactorFromThreads, reactor))
    wall, cpu = time.monotonic(), time.process_time()
    recovered = store.open(body_budget=budget)
    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    return wall, cpu, sum(len(messages) for messages in recovered.messages.values())


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_backlog_options(parser, body_size=100)
    parser.add_argument("--budget", type=int, help="body budget of the opening (default: every body)")
    parser.add_argument("--store", help="the store's URL (default: sqlite:DATA-DIR/store.db)")
    options = parser.parse_args(argv)
    if options.store is not None:
        seconds = fill(options.store, options.messages, options.body_size)
        print(f"filled {options.messages:,} messages of {options.body_size} B in {seconds:.1f} s")
        report(*recover(options.store, options.budget))
        return
    base = Path(options.data_dir or tempfile.mkdtemp(prefix="bench-recovery-"))
    try:
        path = filled_store(base, options.messages, options.body_size)
        report(*recover(f"sqlite:{path}", options.budget))
    finally:
        if not options.keep:
            shutil.rmtree(base)


def report(wall: float, cpu: float, count: int) -> None:
    print(f"recovered {count:,} messages in {wall:.2f} s ({cpu:.2f} s CPU, "
          f"{cpu / max(count, 1) * 1e6:.2f} us per message)")


if __name__ == "__main__":
    main()
