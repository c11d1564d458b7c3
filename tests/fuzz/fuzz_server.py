"""A coverage-guided fuzz target (atheris) for the broker's input path.

Run from the repository's root, with a directory for the corpus (seeded with
:func:`tests.fuzz.harness.seeds` when empty) and libFuzzer's options::

    pip install atheris
    python -m tests.fuzz.fuzz_server fuzz-corpus -max_total_time=600

An input that makes the broker fail is written to ``crash-<sha1>``; copy it
into ``tests/fuzz/regressions/`` (``tests/fuzz/test_regressions.py`` replays
every file there) and fix the broker.
"""

from __future__ import annotations

import os
import sys

import atheris
from twisted.logger import globalLogPublisher

with atheris.instrument_imports(include=["txamqp09", "tests.fuzz.harness"]):
    from tests.fuzz.harness import feed_server, seeds


def seed_corpus(directory: str) -> None:
    """Write the seeds into *directory* if it holds nothing yet."""
    os.makedirs(directory, exist_ok=True)
    if not os.listdir(directory):
        for number, seed in enumerate(seeds()):
            with open(os.path.join(directory, f"seed-{number}"), "wb") as file:
                file.write(seed)


def main() -> None:
    corpus = [argument for argument in sys.argv[1:] if not argument.startswith("-")]
    for directory in corpus[:1]:
        seed_corpus(directory)
    # Thousands of inputs a second: the broker's log lines would only slow them down.
    for observer in list(globalLogPublisher._observers):  # type: ignore[attr-defined]
        globalLogPublisher.removeObserver(observer)
    atheris.Setup(sys.argv, feed_server)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
