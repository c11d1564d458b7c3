"""A private RabbitMQ node on loopback, for interop tests and benchmarks.

:class:`RabbitMQ` starts the Debian package's ``rabbitmq-server`` with a
directory, node name, Erlang port mapper (epmd) and ports of its own, all
bound to 127.0.0.1, so that it never disturbs another node on the machine
and is reachable only from it. Start-up takes several seconds;
:func:`shared_rabbitmq` starts one node per process, lazily, and stops it
when the process exits.

Typical use in a trial test::

    from txamqp09.testing.rabbitmq import rabbitmq_missing, shared_rabbitmq

    class InteropTests(TestCase):
        skip = rabbitmq_missing()

        def setUp(self):
            self.port = shared_rabbitmq().port

The node accepts guest/guest on virtual host ``/``.

:class:`RabbitMQCluster` joins several such nodes into one cluster (one
epmd for all, the same Erlang cookie), as RabbitMQ's clustering guide
describes, for benchmarks of quorum queues::

    cluster = RabbitMQCluster(base_dir, size=3)
    cluster.start()
    leader_port = cluster.nodes[0].port
    ...
    cluster.stop()
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from typing import IO, Any, Mapping, Optional, Sequence, Union

__all__ = [
    "CLI_USER",
    "ERL_CALL",
    "RABBITMQ_BIN",
    "TLSFiles",
    "RabbitMQ",
    "RabbitMQCluster",
    "RabbitMQError",
    "erlang_term",
    "rabbitmq_missing",
    "shared_rabbitmq",
    "free_port",
]

#: Where the Debian package keeps the scripts that run the broker directly.
RABBITMQ_BIN = "/usr/lib/rabbitmq/bin"
#: Erlang's small C client that evaluates expressions on a running node
#: (Debian's erlang-base, which rabbitmq-server depends on, keeps it here).
ERL_CALL = "/usr/lib/erlang/bin/erl_call"
#: The acting user rabbitmqctl names in the changes it makes (the last
#: argument of ``rabbit_vhost:add`` and the like; see :meth:`RabbitMQ.call`).
CLI_USER = "rmq-cli"
_LOOPBACK = "127.0.0.1"
_ERL_LOOPBACK_ARGS = "-kernel inet_dist_use_interface {127,0,0,1}"
_AMQP0_9_1_HEADER = b"AMQP\x00\x00\x09\x01"
#: prctl option: the signal a child gets when its parent dies.
_PR_SET_PDEATHSIG = 1


class RabbitMQError(Exception):
    """The node did not start or stop as asked; the message tells why."""


def rabbitmq_missing() -> Optional[str]:
    """Why a RabbitMQ node cannot be started here, or None when it can.

    Suitable as a trial ``skip`` attribute.
    """
    server = os.path.join(RABBITMQ_BIN, "rabbitmq-server")
    if not os.access(server, os.X_OK):
        return (
            f"RabbitMQ is not installed ({server} is missing); "
            "install the Debian package rabbitmq-server to run these tests"
        )
    if shutil.which("epmd") is None:
        return "Erlang's epmd is not on PATH; install the Debian package rabbitmq-server"
    if not os.access(ERL_CALL, os.X_OK):
        return f"Erlang's erl_call is missing ({ERL_CALL}); install the Debian package erlang-base"
    return None


def erlang_term(value: Union[str, int]) -> str:
    """*value* written as an Erlang term: an integer as itself, a string as
    a UTF-8 binary whose every character other than printable ASCII (and
    the quote and backslash) is a ``\\x{...}`` escape (``<<"a\\x{5c}b"/utf8>>``
    for ``a\\b``), so that the text erl_call sends is plain ASCII."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"no Erlang term for {value!r}")
    if isinstance(value, int):
        return str(value)
    escaped = "".join(
        character if " " <= character <= "~" and character not in '"\\' else f"\\x{{{ord(character):x}}}"
        for character in value
    )
    return f'<<"{escaped}"/utf8>>'


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((_LOOPBACK, 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class TLSFiles:
    """PEM files for a TLS listener: the CA that signs peers, and the node's own pair.

    :param verify_peer: ask clients for a certificate signed by *ca_file*.
    :param require_peer_cert: refuse clients that present no certificate.
    """

    ca_file: str
    cert_file: str
    key_file: str
    verify_peer: bool = True
    require_peer_cert: bool = False


class RabbitMQ:
    """One RabbitMQ node with its own home, data, logs, epmd and ports.

    :param base_dir: a directory the node may own: home, data and logs go there.
    :param tls: when given, a TLS listener on :attr:`tls_port` as well.
    :param config: extra ``rabbitmq.conf`` settings, key to value.
    :param start_timeout: seconds :meth:`start` waits for the node.
    :param management: enable the ``rabbitmq_management`` plugin, its HTTP
        API listening on :attr:`management_port`.
    :param prometheus: enable the ``rabbitmq_prometheus`` plugin, its
        metrics listening on :attr:`prometheus_port`.
    :param more_plugins: more plugins to enable (``rabbitmq_shovel`` ...).
    :param epmd_port: the port of an epmd started by someone else (the
        node's cluster), which the node then neither starts nor stops; by
        default the node runs an epmd of its own.
    :param cookie: the Erlang cookie (nodes of one cluster share theirs);
        by default the node makes one at its first start.

    :ivar port: the AMQP port on 127.0.0.1 (known once constructed).
    :ivar tls_port: the AMQPS port, or None without *tls*.
    :ivar management_port: the management API's port on 127.0.0.1, or None
        without *management*.
    :ivar prometheus_port: the metrics port on 127.0.0.1, or None without
        *prometheus*.
    """

    def __init__(
        self,
        base_dir: str,
        *,
        tls: Optional[TLSFiles] = None,
        config: Mapping[str, str] = {},
        start_timeout: float = 60.0,
        management: bool = False,
        prometheus: bool = False,
        more_plugins: Sequence[str] = (),
        epmd_port: Optional[int] = None,
        cookie: Optional[str] = None,
    ) -> None:
        self.base_dir = os.path.abspath(base_dir)
        self.more_plugins = tuple(more_plugins)
        self.tls = tls
        self.extra_config = dict(config)
        self.start_timeout = start_timeout
        self.port = free_port()
        self.tls_port: Optional[int] = free_port() if tls is not None else None
        self.management_port: Optional[int] = free_port() if management else None
        self.prometheus_port: Optional[int] = free_port() if prometheus else None
        self.dist_port = free_port()
        self.own_epmd = epmd_port is None
        self.epmd_port = free_port() if epmd_port is None else epmd_port
        self.cookie = cookie
        self.node_name = f"txamqp09-{os.getpid()}-{self.port}@localhost"
        self._server: Optional[subprocess.Popen[bytes]] = None
        self._epmd: Optional[subprocess.Popen[bytes]] = None

    # -- paths and environment -------------------------------------------

    def _path(self, *parts: str) -> str:
        return os.path.join(self.base_dir, *parts)

    @property
    def log_file(self) -> str:
        """The file the node's standard output and error go to."""
        return self._path("server.out")

    def environment(self) -> dict[str, str]:
        """The environment the node, erl_call and ``rabbitmqctl`` run with."""
        env = dict(os.environ)
        env.update(
            HOME=self._path("home"),
            RABBITMQ_NODENAME=self.node_name,
            RABBITMQ_NODE_IP_ADDRESS=_LOOPBACK,
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port),
            RABBITMQ_MNESIA_BASE=self._path("mnesia"),
            RABBITMQ_LOG_BASE=self._path("log"),
            RABBITMQ_PID_FILE=self._path("rabbitmq.pid"),
            RABBITMQ_ENABLED_PLUGINS_FILE=self._path("enabled_plugins"),
            RABBITMQ_CONFIG_FILE=self._path("rabbitmq"),
            RABBITMQ_ADVANCED_CONFIG_FILE=self._path("advanced.config"),
            RABBITMQ_CONF_ENV_FILE=self._path("rabbitmq-env.conf"),
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=_ERL_LOOPBACK_ARGS,
            RABBITMQ_CTL_ERL_ARGS=_ERL_LOOPBACK_ARGS,
            ERL_EPMD_ADDRESS=_LOOPBACK,
            ERL_EPMD_PORT=str(self.epmd_port),
            RUNNING_UNDER_SYSTEMD="true",
        )
        env.pop("NOTIFY_SOCKET", None)
        return env

    def _config_lines(self) -> list[str]:
        lines = [
            f"listeners.tcp.default = {_LOOPBACK}:{self.port}",
            "loopback_users = none",
            "log.console = true",
            "log.file = false",
        ]
        if self.tls is not None:
            lines += [
                f"listeners.ssl.default = {_LOOPBACK}:{self.tls_port}",
                f"ssl_options.cacertfile = {self.tls.ca_file}",
                f"ssl_options.certfile = {self.tls.cert_file}",
                f"ssl_options.keyfile = {self.tls.key_file}",
                "ssl_options.verify = " + ("verify_peer" if self.tls.verify_peer else "verify_none"),
                "ssl_options.fail_if_no_peer_cert = " + str(self.tls.require_peer_cert).lower(),
            ]
        if self.management_port is not None:
            lines += [f"management.tcp.ip = {_LOOPBACK}", f"management.tcp.port = {self.management_port}"]
        if self.prometheus_port is not None:
            lines += [f"prometheus.tcp.ip = {_LOOPBACK}", f"prometheus.tcp.port = {self.prometheus_port}"]
        lines += [f"{key} = {value}" for key, value in self.extra_config.items()]
        return lines

    def _write_files(self) -> None:
        for directory in ("home", "mnesia", "log"):
            os.makedirs(self._path(directory), exist_ok=True)
        files = {
            "enabled_plugins": f"[{', '.join(self.plugins())}].\n",
            "rabbitmq.conf": "\n".join(self._config_lines()) + "\n",
            "advanced.config": "[].\n",
            "rabbitmq-env.conf": "",
        }
        for name, text in files.items():
            with open(self._path(name), "w") as file:
                file.write(text)
        if self.cookie is not None:
            cookie_path = self._path("home", ".erlang.cookie")
            with open(os.open(cookie_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400), "w") as cookie_file:
                cookie_file.write(self.cookie)

    def plugins(self) -> list[str]:
        """The plugins the node enables."""
        enabled = {"rabbitmq_management": self.management_port, "rabbitmq_prometheus": self.prometheus_port}
        return [name for name, port in enabled.items() if port is not None] + list(self.more_plugins)

    # -- life cycle --------------------------------------------------------

    @property
    def running(self) -> bool:
        """The node's process is alive."""
        return self._server is not None and self._server.poll() is None

    def start(self) -> None:
        """Start epmd and the node; return once it answers AMQP on :attr:`port`.

        On Linux the node and its epmd end when the thread that started them
        ends, so that a killed test run leaves nothing behind: start them from
        a thread that lives as long as they should (normally the main one).

        :raises RabbitMQError: the node exited or did not answer within
            ``start_timeout`` seconds; the message holds the end of its log.
        """
        if self._server is not None:
            raise RabbitMQError("this node was already started")
        self._write_files()
        env = self.environment()
        if self.own_epmd:
            self._epmd = start_epmd(self.epmd_port, env)
        self._server = subprocess.Popen(
            [os.path.join(RABBITMQ_BIN, "rabbitmq-server")],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=self.base_dir,
            preexec_fn=_end_with_parent,
        )
        assert self._server.stdout is not None
        started = threading.Event()
        threading.Thread(
            target=_copy_log, args=(self._server.stdout, self.log_file, started), daemon=True,
            name=f"rabbitmq log {self.node_name}",
        ).start()
        try:
            self._wait_ready(started)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, started: threading.Event) -> None:
        """Wait until the node logs that it started (or exits), then check it answers."""
        if not started.wait(self.start_timeout):
            raise RabbitMQError(
                f"RabbitMQ did not finish starting within {self.start_timeout} s:\n{self.log_tail()}"
            )
        if not self.running:
            raise RabbitMQError(f"RabbitMQ exited during start-up:\n{self.log_tail()}")
        http_ports = [port for port in (self.management_port, self.prometheus_port) if port is not None]
        if not _answers_amqp(self.port) or not all(_listens(port) for port in http_ports):
            raise RabbitMQError(
                f"RabbitMQ says it started but does not answer on {_LOOPBACK}:{self.port}:\n{self.log_tail()}"
            )

    def log_tail(self, lines: int = 30) -> str:
        """The last *lines* lines the node printed."""
        try:
            with open(self.log_file, errors="replace") as log:
                return "".join(log.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def evaluate(self, expressions: str, timeout: float = 60.0) -> str:
        """Evaluate Erlang *expressions* (ending with a full stop) on the node;
        the value of the last one, as erl_call prints it (``{answer, 42}``).

        This runs ``erl_call``, which joins the node's distribution as a C
        program in milliseconds, where ``rabbitmqctl eval`` first boots a
        CLI node of its own (several seconds of CPU, a minute or more on a
        loaded machine).

        :raises RabbitMQError: the expressions failed or could not be sent.
        """
        with open(self._path("home", ".erlang.cookie")) as cookie_file:
            cookie = cookie_file.read().strip()
        result = subprocess.run(
            [ERL_CALL, "-n", self.node_name, "-c", cookie, "-timeout", str(int(timeout)), "-e"],
            env=self.environment(),
            input=expressions.encode("utf-8") + b"\n",
            capture_output=True,
            timeout=timeout,
        )
        output = result.stdout.decode("utf-8", "replace")
        if result.returncode or not output.startswith("{ok,"):
            raise RabbitMQError(
                f"erl_call could not evaluate {expressions!r} ({result.returncode}):\n"
                f"{output}{result.stderr.decode('utf-8', 'replace')}"
            )
        return output[len("{ok,"):-1].strip()

    def call(self, module: str, function: str, *arguments: Union[str, int]) -> str:
        """Call ``module:function(arguments...)`` on the node, as ``rabbitmqctl``
        does for its commands (``rabbit_vhost:add``,
        ``rabbit_auth_backend_internal:set_permissions`` ...), through
        :meth:`evaluate`; return the value erl_call prints.

        Strings go as UTF-8 binaries (what the CLI passes), integers as
        integers; the acting user rabbitmqctl adds is the caller's to pass.

        :raises RabbitMQError: the call failed or answered ``{error, ...}``
            or ``{error_string, ...}``.
        """
        expression = f"{module}:{function}({', '.join(map(erlang_term, arguments))})."
        value = self.evaluate(expression)
        if value.startswith("{error"):
            raise RabbitMQError(f"{expression} answered {value}")
        return value

    def os_pid(self) -> int:
        """The process id of the node's Erlang VM (the one to signal)."""
        return int(self.evaluate("list_to_integer(os:getpid()).").strip())

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the node, then its epmd (if it runs its own).

        The node gets SIGTERM, on which RabbitMQ shuts down as cleanly as
        with ``rabbitmqctl stop`` but without starting an Erlang CLI node
        (about 1 s instead of 6); SIGKILL follows after *timeout* seconds.
        """
        server, self._server = self._server, None
        if server is not None:
            _end_process(server, timeout)
        epmd, self._epmd = self._epmd, None
        if epmd is not None:
            _end_process(epmd, 5.0)


def start_epmd(port: int, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Erlang's port mapper on 127.0.0.1:*port* (ended with its starter)."""
    return subprocess.Popen(
        ["epmd", "-port", str(port), "-address", _LOOPBACK],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_end_with_parent,
    )


class RabbitMQCluster:
    """*size* RabbitMQ nodes joined into one cluster on loopback.

    The nodes share one epmd and one Erlang cookie; the first one starts
    alone, and each other one joins it as ``rabbitmqctl stop_app``,
    ``join_cluster`` and ``start_app`` would (through :meth:`RabbitMQ.evaluate`,
    without a CLI node). A quorum queue declared through a node has its
    leader on that node.

    :param base_dir: a directory the nodes may own (one subdirectory each).
    :param size: how many nodes.
    :param options: more :class:`RabbitMQ` options for every node.
    :ivar nodes: the nodes, the first being the one the others joined.
    """

    def __init__(self, base_dir: str, size: int = 3, **options: Any) -> None:
        self.base_dir = os.path.abspath(base_dir)
        self.epmd_port = free_port()
        cookie = os.urandom(16).hex().upper()
        self.nodes = [
            RabbitMQ(os.path.join(self.base_dir, f"node{number}"), epmd_port=self.epmd_port, cookie=cookie, **options)
            for number in range(1, size + 1)
        ]
        self._epmd: Optional[subprocess.Popen[bytes]] = None

    def start(self) -> None:
        """Start epmd and every node, joining each to the first.

        :raises RabbitMQError: a node did not start or join; the message
            holds the end of its log.
        """
        self._epmd = start_epmd(self.epmd_port, self.nodes[0].environment())
        try:
            first = self.nodes[0]
            first.start()
            for node in self.nodes[1:]:
                node.start()
                self._join(node, first)
            running = self.running_nodes()
            if len(running) != len(self.nodes):
                raise RabbitMQError(f"the cluster runs {running}, not all of {[n.node_name for n in self.nodes]}")
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def _join(node: RabbitMQ, first: RabbitMQ) -> None:
        """Make *node* (running) a disc node of *first*'s cluster."""
        node.evaluate("rabbit:stop().")
        joined = node.evaluate(f"rabbit_mnesia:join_cluster('{first.node_name}', disc).")
        if joined not in ("ok", "{ok,already_member}"):
            raise RabbitMQError(f"{node.node_name} could not join {first.node_name}: {joined}\n{node.log_tail()}")
        node.evaluate("rabbit:start().")

    def running_nodes(self) -> list[str]:
        """The cluster's running nodes, as its first live node sees them."""
        for node in self.nodes:
            if node.running:
                listed = node.evaluate("rabbit_nodes:all_running().")
                return sorted(name.strip("' ") for name in listed.strip("[]").split(",") if name.strip())
        return []

    def stop(self) -> None:
        """Stop every node, then the shared epmd."""
        for node in reversed(self.nodes):
            node.stop()
        epmd, self._epmd = self._epmd, None
        if epmd is not None:
            _end_process(epmd, 5.0)


#: What the node logs once its boot steps (listeners included) are done.
STARTED_LINE = b"Server startup complete"


def _copy_log(output: IO[bytes], path: str, started: threading.Event) -> None:
    """Copy the node's output, line by line, to the file at *path*; set
    *started* once the node logs :data:`STARTED_LINE`, or its output ends
    (the node exited)."""
    with open(path, "wb", buffering=0) as log:
        for line in output:
            log.write(line)
            if STARTED_LINE in line:
                started.set()
    started.set()


def _end_with_parent() -> None:
    """In the child: get SIGTERM when the process that started it dies (Linux).

    A test run that is killed outright cannot stop its node; this stops it
    anyway instead of leaving it running.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def _end_process(process: subprocess.Popen[bytes], timeout: float) -> None:
    """Terminate *process*; kill it when it lingers past *timeout* seconds."""
    for end in (process.terminate, process.kill):
        if process.poll() is not None:
            return
        end()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            continue


def _listens(port: int) -> bool:
    """Something accepts TCP connections on *port*."""
    try:
        with socket.create_connection((_LOOPBACK, port), timeout=2.0):
            return True
    except OSError:
        return False


def _answers_amqp(port: int) -> bool:
    """A server on *port* answers a 0-9-1 header with a method frame."""
    try:
        with socket.create_connection((_LOOPBACK, port), timeout=2.0) as connection:
            connection.sendall(_AMQP0_9_1_HEADER)
            first = connection.recv(1)
    except OSError:
        return False
    return first == b"\x01"


_shared: dict[tuple[bool, bool, tuple[str, ...]], RabbitMQ] = {}
_shared_failure: dict[tuple[bool, bool, tuple[str, ...]], RabbitMQError] = {}


def shared_rabbitmq(
    *, management: bool = False, prometheus: bool = False, more_plugins: Sequence[str] = ()
) -> RabbitMQ:
    """The node this process shares: started on first use, stopped at exit.

    :param management: the node with the management plugin (a second one,
        so that the plugin's statistics cost nothing to the plain node's
        benchmarks).
    :param prometheus: the node with the prometheus plugin (another one,
        for the same reason).
    :param more_plugins: more plugins the node runs (one node per set).
    :raises RabbitMQError: it could not be started (again on every later
        call, without retrying).
    """
    key = (management, prometheus, tuple(more_plugins))
    if key in _shared_failure:
        raise _shared_failure[key]
    if key not in _shared:
        base_dir = tempfile.mkdtemp(prefix="txamqp09-rabbitmq-")
        node = RabbitMQ(base_dir, management=management, prometheus=prometheus, more_plugins=more_plugins)
        try:
            node.start()
        except RabbitMQError as failure:
            _shared_failure[key] = failure
            shutil.rmtree(base_dir, ignore_errors=True)
            raise
        atexit.register(_stop_and_remove, node)
        _shared[key] = node
    return _shared[key]


def _stop_and_remove(node: RabbitMQ) -> None:
    node.stop()
    shutil.rmtree(node.base_dir, ignore_errors=True)
