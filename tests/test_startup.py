"""``twistd amqp09`` that cannot start says why in one line and exits with 1."""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

from txamqp09 import __version__

ROOT = Path(__file__).resolve().parent.parent

_TWISTD = "import sys; from twisted.scripts.twistd import run; sys.argv[0] = 'twistd'; run()"


class StartupFailureTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.directory = Path(self.mktemp()).resolve()
        self.directory.mkdir()

    def twistd(self, *argv: str) -> tuple[int, list[str]]:
        """Run ``twistd -n --pidfile= amqp09 ARGV``: its exit status and the
        lines it wrote (stdout and stderr), less twistd's own start lines."""
        result = subprocess.run(
            [sys.executable, "-c", _TWISTD, "-n", "--pidfile=", "amqp09", *argv],
            cwd=self.directory,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        lines = [
            line for line in (result.stdout + result.stderr).splitlines()
            if line and "UnixAppLogger" not in line
        ]
        return result.returncode, lines

    def assertOneLine(self, argv: list[str], expected: str) -> None:
        status, lines = self.twistd(*argv)
        self.assertEqual(status, 1, lines)
        self.assertFalse([line for line in lines if "Traceback" in line], lines)
        self.assertEqual(len([line for line in lines if expected in line]), 1, lines)

    def test_port_in_use(self) -> None:
        taken = socket.socket()
        self.addCleanup(taken.close)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        self.assertOneLine(
            ["--transient", "--listen", f"tcp:{port}:interface=127.0.0.1"],
            f"cannot start: Couldn't listen on 127.0.0.1:{port}: [Errno 98] Address already in use.",
        )

    def test_bad_option_value(self) -> None:
        status, lines = self.twistd("--memory-budget", "lots")
        self.assertEqual(status, 1)
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("amqp09: Parameter type enforcement failed: 'lots' is not a size", lines[0])

    def test_unreadable_definitions_file(self) -> None:
        missing = self.directory / "missing.json"
        status, lines = self.twistd("--transient", "--definitions", str(missing))
        self.assertEqual((status, len(lines)), (1, 1), lines)
        self.assertIn(f"cannot read definitions from {missing}", lines[0])

    def test_data_directory_in_use(self) -> None:
        data = self.directory / "data"
        data.mkdir()
        with open(data / "store.db.lock", "ab") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.assertOneLine(
                ["--data-dir", str(data), "--listen", "tcp:0:interface=127.0.0.1"],
                f"cannot start: {data} is in use by another broker; give each broker its own data directory",
            )

    def test_version(self) -> None:
        result = subprocess.run(
            [sys.executable, "-c", _TWISTD, "amqp09", "--version"],
            cwd=self.directory, env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True, text=True, timeout=60,
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.stdout, rf"^txamqp09 {__version__} \(Twisted [\d.]+\w*, Python [\d.]+\)\n$")
        self.assertEqual(os.listdir(self.directory), [])
