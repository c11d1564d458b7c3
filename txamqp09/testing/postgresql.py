"""A private PostgreSQL server on loopback, for the store's tests and benchmarks.

:class:`PostgreSQL` runs Debian's PostgreSQL (``initdb`` and ``postgres``
from :data:`POSTGRESQL_BIN`) on a data directory, port and socket directory
of its own, listening on 127.0.0.1 only, so that it never disturbs the
machine's own clusters. ``initdb`` refuses to run as root: run as root, the
fixture runs every PostgreSQL program as the ``postgres`` user the Debian
package creates, in a directory that user owns.

A server can stream to a standby (:meth:`PostgreSQL.add_standby`), which can
be made synchronous (:meth:`PostgreSQL.make_synchronous`) and promoted
(:meth:`PostgreSQL.promote`); :func:`group_url` names both in one libpq URI
that follows the promotion. :meth:`PostgreSQL.kill` ends the server as a
crash would (SIGKILL of the postmaster).

Typical use in a trial test::

    from txamqp09.testing.postgresql import postgresql_missing, shared_postgresql

    class StoreTests(TestCase):
        skip = postgresql_missing()

        def setUp(self):
            self.url = shared_postgresql().new_database()

The servers accept the user ``postgres`` without a password (``trust``),
from 127.0.0.1 only.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Callable, Optional, Sequence

from txamqp09.testing.rabbitmq import free_port

__all__ = [
    "POSTGRESQL_BIN",
    "PostgreSQL",
    "PostgreSQLError",
    "group_url",
    "postgresql_missing",
    "psycopg_missing",
    "shared_postgresql",
]

#: Where Debian's postgresql-15 package keeps the server's programs.
POSTGRESQL_BIN = "/usr/lib/postgresql/15/bin"
#: The account PostgreSQL's programs run as when the tests run as root.
SERVER_USER = "postgres"
_LOOPBACK = "127.0.0.1"
_PR_SET_PDEATHSIG = 1
_READY_POLL_SECONDS = 0.05


class PostgreSQLError(Exception):
    """A server did not start, stop or answer as asked; the message says why."""


def postgresql_missing() -> Optional[str]:
    """Why a PostgreSQL server cannot be started here, or None when it can.

    Suitable as a trial ``skip`` attribute.
    """
    for program in ("initdb", "postgres", "pg_ctl", "pg_basebackup", "psql"):
        path = os.path.join(POSTGRESQL_BIN, program)
        if not os.access(path, os.X_OK):
            return (
                f"PostgreSQL is not installed ({path} is missing); "
                "install the Debian package postgresql to run these tests"
            )
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            return f"running as root and there is no user {SERVER_USER!r} to run PostgreSQL as (initdb refuses root)"
    return None


def psycopg_missing() -> Optional[str]:
    """Why the PostgreSQL store cannot be used here (psycopg 3 is not
    installed), or None when it can; also checks :func:`postgresql_missing`."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg 3 is not installed; pip install 'txamqp09[postgresql]' to run these tests"
    return postgresql_missing()


def _server_account() -> Optional[pwd.struct_passwd]:
    """The account to run PostgreSQL's programs as (None: this process's own)."""
    return pwd.getpwnam(SERVER_USER) if os.geteuid() == 0 else None


def _as_server_user(account: Optional[pwd.struct_passwd]) -> Callable[[], None]:
    """A ``preexec_fn``: become *account* (when given), then ask for SIGQUIT
    (PostgreSQL's immediate shutdown) when the parent dies, so that a test run
    killed outright leaves no server behind. The request comes after the
    change of user, which would clear it."""

    def preexec() -> None:
        if account is not None:
            os.setgid(account.pw_gid)
            os.initgroups(account.pw_name, account.pw_gid)
            os.setuid(account.pw_uid)
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGQUIT)
        except (OSError, AttributeError):
            pass

    return preexec


class PostgreSQL:
    """One PostgreSQL server with its own data directory, port and sockets.

    :param base_dir: a new directory the server may own (data, sockets and
        its log go there); made if missing, and handed to the ``postgres``
        user when running as root.

    :ivar port: its port on 127.0.0.1 (known once constructed).
    """

    def __init__(self, base_dir: str) -> None:
        self.base_dir = os.path.abspath(base_dir)
        self.port = free_port()
        self._account = _server_account()
        self._server: Optional[subprocess.Popen[bytes]] = None
        os.makedirs(self.base_dir, exist_ok=True)
        if self._account is not None:
            os.chown(self.base_dir, self._account.pw_uid, self._account.pw_gid)

    @property
    def data_dir(self) -> str:
        """The server's data directory."""
        return os.path.join(self.base_dir, "data")

    @property
    def log_file(self) -> str:
        """Where the server's output goes."""
        return os.path.join(self.base_dir, "server.log")

    @property
    def pid(self) -> Optional[int]:
        """The postmaster's process id while it runs."""
        return self._server.pid if self.running else None  # type: ignore[union-attr]

    @property
    def running(self) -> bool:
        """Whether the postmaster runs."""
        return self._server is not None and self._server.poll() is None

    def url(self, database: str = "postgres") -> str:
        """A libpq URI of *database* on this server."""
        return f"postgresql://{SERVER_USER}@{_LOOPBACK}:{self.port}/{database}"

    def run(self, program: str, *arguments: str, timeout: float = 120.0) -> str:
        """Run one of PostgreSQL's programs to its end, as the server's
        user; its standard output.

        :raises PostgreSQLError: it failed (with what it wrote).
        """
        result = subprocess.run(
            [os.path.join(POSTGRESQL_BIN, program), *arguments],
            cwd=self.base_dir,
            capture_output=True,
            preexec_fn=_as_server_user(self._account),
            timeout=timeout,
        )
        if result.returncode != 0:
            output = (result.stdout + result.stderr).decode(errors="replace").strip()
            raise PostgreSQLError(f"{program} {' '.join(arguments)} failed ({result.returncode}): {output}")
        return result.stdout.decode()

    def initialise(self) -> None:
        """Make a new cluster that listens on loopback only and streams to standbys."""
        self.run("initdb", "-D", self.data_dir, "-A", "trust", "-U", SERVER_USER, "--no-sync")
        self._configure([
            "wal_level = replica",
            "max_wal_senders = 8",
            "max_replication_slots = 8",
            "hot_standby = on",
            "fsync = on",
        ])
        with open(os.path.join(self.data_dir, "pg_hba.conf"), "a") as hba:
            hba.write(f"host replication {SERVER_USER} {_LOOPBACK}/32 trust\n")

    def _configure(self, settings: Sequence[str]) -> None:
        """Append this server's own address and *settings* to its configuration."""
        lines = [
            f"listen_addresses = '{_LOOPBACK}'",
            f"port = {self.port}",
            f"unix_socket_directories = '{self.base_dir}'",
            *settings,
        ]
        with open(os.path.join(self.data_dir, "postgresql.conf"), "a") as conf:
            conf.write("\n".join(lines) + "\n")

    def start(self, timeout: float = 60.0) -> None:
        """Start the postmaster (initialising the cluster first if there is
        none) and wait until it accepts connections.

        :raises PostgreSQLError: it ended or did not answer within *timeout* seconds.
        """
        if not os.path.exists(os.path.join(self.data_dir, "PG_VERSION")):
            self.initialise()
        with open(self.log_file, "ab") as log:
            self._server = subprocess.Popen(
                [os.path.join(POSTGRESQL_BIN, "postgres"), "-D", self.data_dir],
                cwd=self.base_dir,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_as_server_user(self._account),
            )
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until the server accepts connections.

        :raises PostgreSQLError: it ended or did not answer within *timeout* seconds.
        """
        deadline = time.monotonic() + timeout
        while not self._answers():
            if not self.running:
                raise PostgreSQLError(f"PostgreSQL ended while starting:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise PostgreSQLError(f"PostgreSQL did not answer within {timeout} s:\n{self.log_tail()}")
            time.sleep(_READY_POLL_SECONDS)

    def _answers(self) -> bool:
        """Whether the server accepts connections now (pg_isready)."""
        ready = subprocess.run(
            [os.path.join(POSTGRESQL_BIN, "pg_isready"), "-q", "-h", _LOOPBACK, "-p", str(self.port)],
            capture_output=True,
        )
        return ready.returncode == 0

    def log_tail(self, lines: int = 30) -> str:
        """The last *lines* lines of the server's log."""
        try:
            with open(self.log_file, errors="replace") as log:
                return "".join(log.readlines()[-lines:])
        except OSError:
            return ""

    def execute(self, sql: str, database: str = "postgres") -> str:
        """Run *sql* through psql; its output, rows one a line, columns separated by ``|``."""
        return self.run(
            "psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
            "-h", _LOOPBACK, "-p", str(self.port), "-U", SERVER_USER, "-d", database, "-c", sql,
        ).strip()

    def new_database(self) -> str:
        """Create a database no one has used; its libpq URI."""
        name = f"amqp09_{os.getpid()}_{time.monotonic_ns()}"
        self.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def add_standby(self, base_dir: str, timeout: float = 120.0) -> PostgreSQL:
        """Copy this running server into a new streaming standby in
        *base_dir* and start it (asynchronous until :meth:`make_synchronous`)."""
        standby = PostgreSQL(base_dir)
        self.run(
            "pg_basebackup", "-h", _LOOPBACK, "-p", str(self.port), "-U", SERVER_USER,
            "-D", standby.data_dir, "-R", "-X", "stream", "--checkpoint=fast", "--no-sync", timeout=timeout,
        )
        standby._configure([])
        standby.start()
        return standby

    def make_synchronous(self, timeout: float = 60.0) -> None:
        """Make every standby of this primary synchronous: a commit returns
        once a standby has it on disk. Waits until one reports ``sync``."""
        self.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
        self.execute("SELECT pg_reload_conf()")
        deadline = time.monotonic() + timeout
        while "sync" not in self.execute("SELECT sync_state FROM pg_stat_replication").split():
            if time.monotonic() > deadline:
                raise PostgreSQLError(f"no synchronous standby within {timeout} s")
            time.sleep(_READY_POLL_SECONDS)

    def promote(self) -> None:
        """Make this standby a primary and wait until it accepts writes."""
        self.run("pg_ctl", "-D", self.data_dir, "-w", "promote")

    def kill(self) -> None:
        """End the server as the death of its machine would: SIGKILL of the
        postmaster and of every process it started, at once, so that no
        orphaned backend lingers (one waiting for a synchronous standby in
        COMMIT would hold its client's connection open for ever). The
        postmaster is stopped first so that it starts no more."""
        if self._server is None or not self.running:
            return
        os.kill(self._server.pid, signal.SIGSTOP)
        for child in _children(self._server.pid):
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._server.kill()
        self._server.wait()

    def stop(self, mode: str = "fast", timeout: float = 60.0) -> None:
        """Stop the server: ``fast`` (ends sessions, writes a checkpoint) or
        ``immediate`` (no checkpoint: recovery at the next start)."""
        if self._server is None or not self.running:
            return
        self._server.send_signal({"fast": signal.SIGINT, "immediate": signal.SIGQUIT}[mode])
        try:
            self._server.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def remove(self) -> None:
        """Stop the server and delete its directory."""
        self.stop("immediate")
        shutil.rmtree(self.base_dir, ignore_errors=True)


def _children(pid: int) -> list[int]:
    """The process ids whose parent is *pid* (read from /proc)."""
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                # The command name, in parentheses, may hold spaces: the
                # parent's id is the second field after its closing one.
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(entry))
    return children


def group_url(servers: Sequence[PostgreSQL], database: str) -> str:
    """A libpq URI naming every server of *servers* that connects to the
    one accepting writes (it follows a promoted standby)."""
    hosts = ",".join(f"{_LOOPBACK}:{server.port}" for server in servers)
    return f"postgresql://{SERVER_USER}@{hosts}/{database}?target_session_attrs=read-write"


_shared: list[PostgreSQL] = []


def shared_postgresql() -> PostgreSQL:
    """The server this process shares: started on first use, removed at
    exit. Tests take a database of their own with :meth:`PostgreSQL.new_database`."""
    if not _shared:
        server = PostgreSQL(tempfile.mkdtemp(prefix="txamqp09-postgresql-"))
        try:
            server.start()
        except PostgreSQLError:
            server.remove()
            raise
        atexit.register(server.remove)
        _shared.append(server)
    return _shared[0]
