"""The broker's input path against what fuzzing found, random bytes and mutated sessions."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase, TestCase

from tests.fuzz.harness import ServerFault, feed_server, seeds
from tests.wire import strategies as s

#: Every input that ever made the broker fail, one file each.
REGRESSIONS = Path(__file__).parent / "regressions"
ROOT = Path(__file__).parent.parent.parent


class RegressionTests(SynchronousTestCase):
    def test_every_input_fuzzing_broke(self) -> None:
        inputs = sorted(REGRESSIONS.iterdir())
        self.assertTrue(inputs)
        for path in inputs:
            try:
                feed_server(path.read_bytes())
            except ServerFault as fault:
                self.fail(f"{path.name}: {fault}")

    def test_the_harness_sees_a_fault(self) -> None:
        """A fault of the broker's own is reported (so the replays mean something)."""
        from txamqp09.broker import handshake

        original = handshake.ServerHandshake.connection_tune_ok

        def broken(self: object, method: object) -> None:
            raise KeyError("broken on purpose")

        handshake.ServerHandshake.connection_tune_ok = broken  # type: ignore[method-assign]
        try:
            self.assertRaises(ServerFault, feed_server, seeds()[-1])
            self.assertEqual(len(self.flushLoggedErrors(KeyError)), 1)
        finally:
            handshake.ServerHandshake.connection_tune_ok = original  # type: ignore[method-assign]


class RandomInputTests(SynchronousTestCase):
    @s.wire_settings
    @given(
        where=st.sampled_from([b"\x00", b"\x02", b"\x01\x00", b"\x01\x01", b"\x01\x02", b"\x03\x00"]),
        data=st.binary(max_size=300),
    )
    def test_random_bytes(self, where: bytes, data: bytes) -> None:
        feed_server(where + data)

    @s.wire_settings
    @given(data=st.data())
    def test_mutated_sessions(self, data: st.DataObject) -> None:
        session = bytearray(data.draw(st.sampled_from(seeds())))
        for _ in range(data.draw(st.integers(1, 4))):
            where = data.draw(st.integers(1, len(session) - 1))
            action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
            if action == "flip":
                session[where] = data.draw(st.integers(0, 255))
            elif action == "cut":
                del session[where : where + data.draw(st.integers(1, 64))]
            else:
                session[where:where] = data.draw(st.binary(min_size=1, max_size=8))
        feed_server(bytes(session))


class AtherisTargetTests(TestCase):
    """The fuzz target runs as docs/limits.rst says (with atheris installed)."""

    timeout = 300

    def test_a_few_runs(self) -> None:
        if importlib.util.find_spec("atheris") is None:
            raise self.skipTest("atheris is not installed (pip install atheris)")
        corpus = os.path.abspath(self.mktemp())
        environment = dict(os.environ, PYTHONPATH=str(ROOT))
        result = subprocess.run(
            [sys.executable, "-m", "tests.fuzz.fuzz_server", corpus, "-runs=30"],
            cwd=ROOT, env=environment, capture_output=True, timeout=280,
        )
        self.assertEqual(result.returncode, 0, result.stderr.decode(errors="replace")[-2000:])
        self.assertGreaterEqual(len(os.listdir(corpus)), len(seeds()))
