"""Logins through pika on loopback: a flood of wrong passwords, and how long
correct logins take meanwhile.

The flood runs in a child process of its own, so that its threads do not
compete with the measuring client for one interpreter's lock::

    from txamqp09.testing.logins import logins_during_flood

    result = logins_during_flood(port, "guest", "guest", guesses=200, threads=20)
    result.latencies          # seconds of each correct login (None: refused)
    result.answers            # how the wrong ones were answered, by kind

The child is this module run as a program::

    python txamqp09/testing/logins.py PORT USER GUESSES THREADS

which sends GUESSES wrong passwords for USER from THREADS threads (each
waits for its refusal before it sends the next), prints a line when the
first answer comes and, at the end, the count of each kind of answer as
JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from collections.abc import Callable
from typing import Optional

import pika

__all__ = ["FloodResult", "correct_login", "logins_during_flood", "wrong_logins"]

#: Kinds of answer to a wrong password.
REFUSED, REFUSED_AT_ONCE, ADMITTED = "refused", "refused at once, not held back", "admitted"
#: What a refusal the broker did not hold back says (txamqp09's throttle).
_NOT_HELD = "Answered at once:"


def _parameters(port: int, user: str, password: str) -> pika.ConnectionParameters:
    return pika.ConnectionParameters(
        "127.0.0.1", port, credentials=pika.PlainCredentials(user, password),
        connection_attempts=1, socket_timeout=30, blocked_connection_timeout=None, heartbeat=0,
    )


def correct_login(port: int, user: str, password: str) -> Optional[float]:
    """Seconds pika takes to open a connection to 127.0.0.1:*port* as *user*
    (then closed), or None if the broker refused it."""
    started = time.perf_counter()
    try:
        connection = pika.BlockingConnection(_parameters(port, user, password))
    except pika.exceptions.AMQPConnectionError:
        return None
    elapsed = time.perf_counter() - started
    connection.close()
    return elapsed


def _answer(port: int, user: str, password: str) -> str:
    """How the broker answered one login: one of the kinds above, or the
    error's text."""
    try:
        pika.BlockingConnection(_parameters(port, user, password)).close()
    except pika.exceptions.ProbableAuthenticationError as error:
        text = str(error)
        if "(403)" not in text:
            return text
        return REFUSED_AT_ONCE if _NOT_HELD in text else REFUSED
    except pika.exceptions.AMQPConnectionError as error:
        return f"{type(error).__name__}: {error}"
    return ADMITTED


def wrong_logins(
    port: int, user: str, guesses: int, threads: int, first_answer: Callable[[], object] = lambda: None
) -> Counter[str]:
    """Send *guesses* wrong passwords for *user* from *threads* threads, each
    waiting for its answer before the next; the count of each kind of answer.
    *first_answer* is called once the first answer has come."""
    answers: Counter[str] = Counter()
    lock = threading.Lock()
    numbers = iter(range(guesses))

    def guess() -> None:
        while True:
            with lock:
                number = next(numbers, None)
            if number is None:
                return
            answer = _answer(port, user, f"wrong-{number}")
            with lock:
                if not answers:
                    first_answer()
                answers[answer] += 1

    running = [threading.Thread(target=guess) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()
    return answers


@dataclass
class FloodResult:
    """What :func:`logins_during_flood` saw.

    :ivar latencies: seconds of each correct login during the flood (None: refused).
    :ivar answers: the count of each kind of answer to the wrong passwords.
    :ivar seconds: how long the flood lasted.
    """

    latencies: list[Optional[float]]
    answers: dict[str, int]
    seconds: float


def logins_during_flood(
    port: int, user: str, password: str, *, guesses: int, threads: int, interval: float = 0.5
) -> FloodResult:
    """Flood 127.0.0.1:*port* with *guesses* wrong passwords for *user* from
    *threads* threads of a child process, and log in correctly as *user*
    every *interval* seconds in this one from its first answer until it is over."""
    started = time.monotonic()
    flood = subprocess.Popen(
        [sys.executable, __file__, str(port), user, str(guesses), str(threads)],
        stdout=subprocess.PIPE,
    )
    assert flood.stdout is not None
    latencies: list[Optional[float]] = []
    try:
        flood.stdout.readline()
        while flood.poll() is None:
            tick = time.monotonic()
            latencies.append(correct_login(port, user, password))
            time.sleep(max(0.0, interval - (time.monotonic() - tick)))
        output, _ = flood.communicate()
    finally:
        if flood.poll() is None:
            flood.kill()
            flood.wait()
    if flood.returncode:
        raise RuntimeError(f"the flood of wrong passwords ended with status {flood.returncode}")
    return FloodResult(latencies, json.loads(output), time.monotonic() - started)


def main(argv: list[str]) -> None:
    """``PORT USER GUESSES THREADS``: flood; print a line at the first
    answer, and the count of each kind of answer as JSON at the end."""
    port, user, guesses, threads = argv
    answers = wrong_logins(int(port), user, int(guesses), int(threads), lambda: print("answered", flush=True))
    print(json.dumps(answers))


if __name__ == "__main__":
    main(sys.argv[1:])
