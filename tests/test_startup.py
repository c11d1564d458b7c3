"""``twistd amqp09`` that cannot start says why in one line and exits with 1."""

from __future__ import annotations

import fcntl
import json
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

    def twistd(self, *argv: str, pidfile: str = "") -> tuple[int, list[str]]:
        """Run ``twistd -n --pidfile=PIDFILE amqp09 ARGV`` in the test's
        directory: its exit status and the lines it wrote (stdout and
        stderr), less twistd's own start lines."""
        result = subprocess.run(
            [sys.executable, "-c", _TWISTD, "-n", f"--pidfile={pidfile}", "amqp09", *argv],
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

    def assertUsageError(self, argv: list[str], expected: str) -> None:
        """``twistd amqp09 ARGV`` writes only *expected* (after ``amqp09: ``)
        and exits with 1, before anything starts."""
        status, lines = self.twistd(*argv)
        self.assertEqual((status, lines), (1, [f"amqp09: {expected} (see twistd amqp09 --help)"]))

    def taken_port(self) -> int:
        """A port of 127.0.0.1 another socket listens on."""
        taken = socket.socket()
        self.addCleanup(taken.close)
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        return int(taken.getsockname()[1])

    def test_port_in_use(self) -> None:
        port = self.taken_port()
        self.assertOneLine(
            ["--transient", "--listen", f"tcp:{port}:interface=127.0.0.1"],
            f"cannot start: Couldn't listen on 127.0.0.1:{port}: [Errno 98] Address already in use.",
        )

    def test_failed_start_removes_its_pidfile(self) -> None:
        """twistd writes its pid file before the listeners start; a broker
        that cannot listen, or whose data directory is taken, removes it."""
        port = self.taken_port()
        status, lines = self.twistd(
            "--transient", "--listen", f"tcp:{port}:interface=127.0.0.1", pidfile="broker.pid"
        )
        self.assertEqual(status, 1, lines)
        data = self.directory / "data"
        data.mkdir()
        with open(data / "store.db.lock", "ab") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            status, lines = self.twistd(
                "--data-dir", str(data), "--listen", "tcp:0:interface=127.0.0.1", pidfile="broker.pid"
            )
        self.assertEqual(status, 1, lines)
        self.assertEqual(sorted(os.listdir(self.directory)), ["data"])

    def test_bad_option_value_names_its_option(self) -> None:
        self.assertUsageError(
            ["--memory-budget", "lots"],
            "--memory-budget: 'lots' is not a size: expected a number of bytes, optionally with a unit: "
            "B, kB, MB, GB, TB, KiB, MiB, GiB, TiB (e.g. 256MiB)",
        )

    def test_bad_ports_and_endpoints(self) -> None:
        for argv, expected in [
            (["--port", "99999"], "--port must be a port number from 0 to 65535, not '99999'"),
            (["--listen", "tcp:abc"],
             "--listen 'tcp:abc' is not a server endpoint: invalid literal for int() with base 10: 'abc'"),
            (["--listen", "tcp:70000:interface=127.0.0.1"],
             "--listen 'tcp:70000:interface=127.0.0.1': the port must be from 0 to 65535, not 70000"),
            (["--management", "tcp:notaport"],
             "--management 'tcp:notaport' is not a server endpoint: "
             "invalid literal for int() with base 10: 'notaport'"),
            (["--prometheus", "http:15692"],
             "--prometheus 'http:15692' is not a server endpoint: Unknown endpoint type: 'http'"),
            (["--ssl-port", "65536"], "--ssl-port must be a port number from 0 to 65535, not '65536'"),
        ]:
            self.assertUsageError(argv, expected)

    def test_memory_watermarks_by_rabbitmqs_rules(self) -> None:
        """A number above 1 with a decimal point is neither a fraction (RabbitMQ
        refuses those above 1.0) nor a whole number of bytes: refused."""
        forms = (
            "give a fraction of the machine's memory from 0 to 1 (e.g. 0.4) or a size "
            "(a whole number of bytes, or a number with a unit such as 768MiB or 2GB)"
        )
        self.assertUsageError(["--memory-high-watermark", "1.5"], f"--memory-high-watermark: '1.5' is above 1: {forms}")
        self.assertUsageError(
            ["--memory-high-watermark", "10XB"], f"--memory-high-watermark: '10XB' is not a watermark: {forms}"
        )

    def test_an_invalid_static_shovel(self) -> None:
        definitions = self.directory / "definitions.json"
        definitions.write_text(json.dumps({"shovels": {"bad": {"src-uri": "amqp://", "dest-uri": "amqp://"}}}))
        self.assertUsageError(
            ["--transient", "--definitions", str(definitions)],
            f"--definitions {definitions}: static shovel 'bad': Must specify 'src-exchange' or 'src-queue'",
        )

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
