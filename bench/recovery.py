"""Time the message store takes to open and recover a backlog of persistent messages.

Fills a store with N persistent messages on one durable queue (as
``bench/startup.py`` does), then opens it again, as a broker start does, and reports the
seconds ``SQLiteStore.open`` took (wall clock and this process's CPU) with
and without a body budget, and the database's size. With ``--data-dir`` and
``--keep`` a filled store is reused (only the opening is measured again)::

    python bench/recovery.py                          # 1,000,000 messages of 100 B, 1 queue
    python bench/recovery.py --messages 200000 --body-size 1024
    python bench/recovery.py --budget 16777216        # bodies beyond 16 MiB left on disk
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Optional, cast

from startup import add_backlog_options, filled_store

from twisted.internet.interfaces import IReactorFromThreads
from txamqp09.store.sqlite import SQLiteStore


def recover(path: Path, budget: Optional[int]) -> tuple[float, float, int]:
    """Open the store at *path* once: (wall seconds, CPU seconds, messages recovered).

    The store is left open, its writer thread (a daemon) waiting: the process ends after."""
    from twisted.internet import reactor

    store = SQLiteStore(path, cast(IReactorFromThreads, reactor))
    wall, cpu = time.monotonic(), time.process_time()
    recovered = store.open(body_budget=budget)
    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    return wall, cpu, sum(len(messages) for messages in recovered.messages.values())


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_backlog_options(parser, body_size=100)
    parser.add_argument("--budget", type=int, help="body budget of the opening (default: every body)")
    options = parser.parse_args(argv)
    base = Path(options.data_dir or tempfile.mkdtemp(prefix="bench-recovery-"))
    try:
        path = filled_store(base, options.messages, options.body_size)
        wall, cpu, count = recover(path, options.budget)
        print(f"recovered {count:,} messages in {wall:.2f} s ({cpu:.2f} s CPU, "
              f"{cpu / max(count, 1) * 1e6:.2f} us per message)")
    finally:
        if not options.keep:
            shutil.rmtree(base)


if __name__ == "__main__":
    main()
