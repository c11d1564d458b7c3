"""The durability benchmarks run short: bench/soak.py (kill -9 cycles),
bench/diskfull.py (a real full disk) and bench/ha.py's failures of a group
(on PostgreSQL), with their figures checked; and bench/scale.py's memory
scenarios, small, on this broker alone."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.utils import getProcessOutputAndValue
from twisted.trial.unittest import TestCase

from txamqp09.testing.faults import MountFailed, mount_small_file_system, unmount
from txamqp09.testing.postgresql import psycopg_missing

BENCH = Path(__file__).resolve().parents[2] / "bench"
MiB = 1024 * 1024


class BenchTests(TestCase):
    timeout = 300

    @inlineCallbacks
    def bench(self, script: str, *arguments: str) -> Any:
        """Run bench/*script* with *arguments* and ``--json``; its figures."""
        out, err, code = yield getProcessOutputAndValue(
            sys.executable, [str(BENCH / script), *arguments, "--json"], env=dict(os.environ), reactor=reactor
        )
        self.assertEqual(code, 0, err.decode(errors="replace")[-4000:])
        return json.loads(out.decode().strip().splitlines()[-1])

    @inlineCallbacks
    def test_five_kill_9_cycles_lose_and_corrupt_nothing(self) -> Any:
        figures = yield self.bench("soak.py", "--cycles", "5", "--seconds", "1")
        # A cycle's own "lost" counts what its consumer has not received yet
        # (under load it can lag behind a backlog); the last drain decides.
        self.assertEqual((figures["lost"], figures["corrupt"]), (0, 0))
        self.assertTrue(all(cycle["confirmed"] > 0 for cycle in figures["cycles"]), figures)
        self.assertLess(figures["store_bytes"], 64 * MiB)

    @inlineCallbacks
    def test_a_full_disk_blocks_publishers_and_they_resume_once_it_is_drained(self) -> Any:
        probe = Path(self.mktemp()).absolute()
        try:
            mount_small_file_system(probe, MiB)
        except MountFailed as error:
            raise self.skipTest(f"no small file system to fill: {error}") from None
        unmount(probe)
        # Each step fails the run after 90 s, well before the test's timeout,
        # with the step and the broker's state in the failure's message.
        figures = yield self.bench(
            "diskfull.py", "--size", "24MiB", "--limit", "8MiB", "--after", "100", "--timeout", "90"
        )
        self.assertTrue(figures["blocked"], figures)
        self.assertEqual((figures["nacked"], figures["error"]), (0, None))
        self.assertGreater(figures["confirmed_before_alarm"], 5000)
        self.assertGreaterEqual(figures["confirmed_after_resuming"], 100)
        self.assertEqual((figures["lost"], figures["corrupt"]), (0, 0))

    @inlineCallbacks
    def test_a_backlog_costs_little_and_its_memory_returns_once_drained(self) -> Any:
        """Memory, not time: bytes per queued 16 B message (352 before queues
        kept plain entries bare) and resident memory after a drained backlog
        of 1 KiB messages (9 times the idle figure before the allocator was
        trimmed)."""
        figures = yield self.bench(
            "scale.py", "--only", "txamqp09", "--scenario", "backlog", "--backlog", "200000",
            "--scenario", "drained-1KiB", "--drained", "100000",
        )
        values = {figure["scenario"]: figure["values"]["txamqp09"] for figure in figures}
        self.assertLess(values["backlog: 200,000 x 16 B queued, bytes per message beyond body"], 260)
        self.assertLess(values["drained: 100,000 x 1024 B, after / idle"], 1.3)
        self.assertGreater(values["drained: 100,000 x 1024 B, RSS MiB full"], 100)

    @inlineCallbacks
    def test_a_group_loses_nothing_confirmed_in_each_failure(self) -> Any:
        """bench/ha.py on this broker's group alone, small: every failure is
        survived with nothing confirmed lost, and the broker woken after a
        hang confirms nothing and exits fenced."""
        missing = psycopg_missing()
        if missing:
            raise self.skipTest(missing)
        figures = yield self.bench(
            "ha.py", "--only", "txamqp09", "--messages", "2000", "--backlog", "2000", "--sizes", "1024",
        )
        self.assertEqual([rate["body_size"] for rate in figures["throughput"]], [1024])
        self.assertGreater(figures["throughput"][0]["rate"], 0)
        failovers = figures["failover"]
        self.assertEqual(len(failovers), 3, failovers)
        for failover in failovers:
            self.assertEqual(failover["lost"], 0, failover)
            self.assertGreater(failover["confirmed"], 0, failover)
            self.assertLess(failover["seconds"], 30, failover)
        self.assertGreaterEqual(failovers[0]["confirmed"], 2000)
        hang = failovers[1]["notes"]
        self.assertEqual((hang["woken_broker_confirms"], hang["woken_broker_exit_status"]), (0, 75))

    @inlineCallbacks
    def test_the_takeover_alone_is_timed_as_often_as_asked(self) -> Any:
        """bench/ha.py --only takeover: the group's kill -9 of the active
        alone, twice, each with the backlog queued again; no throughput run,
        nothing confirmed lost, the standby listening before its first
        confirm and its restore logged."""
        missing = psycopg_missing()
        if missing:
            raise self.skipTest(missing)
        figures = yield self.bench("ha.py", "--only", "takeover", "--repeat", "2", "--backlog", "2000")
        self.assertEqual(figures["throughput"], [])
        failovers = figures["failover"]
        self.assertEqual([failover["scenario"] for failover in failovers], ["kill -9 of the active, 2,000 queued"] * 2)
        for failover in failovers:
            self.assertEqual(failover["lost"], 0, failover)
            self.assertGreaterEqual(failover["confirmed"], 2000, failover)
            notes = failover["notes"]
            self.assertLessEqual(notes["listening_seconds"], failover["seconds"], failover)
            self.assertIsNotNone(notes["restore_seconds"], failover)
