"""``amqp09ctl``: rabbitmqctl's common commands, over the management HTTP API.

::

    amqp09ctl list_queues name messages consumers
    amqp09ctl -p /shop add_vhost /shop
    amqp09ctl add_user ann s3cret && amqp09ctl set_user_tags ann monitoring
    amqp09ctl set_policy --apply-to queues ttl "^tmp\\." '{"message-ttl": 60000}'
    amqp09ctl --formatter json list_users
    amqp09ctl export_definitions - > definitions.json

Where the API is and who asks: ``--url``, ``--user`` and ``--password``;
else the environment (``AMQP09CTL_URL``, ``AMQP09CTL_USER``,
``AMQP09CTL_PASSWORD``); else the ``[amqp09ctl]`` section of the file
``--config`` names (default ``~/.config/amqp09ctl.ini``, keys ``url``,
``user``, ``password``); else ``http://127.0.0.1:15672`` as guest/guest.

Output is a table (a header line, then one line per row, columns aligned);
``--formatter json`` prints JSON instead. Errors are one line on stderr;
the exit code is 1 for a refusal by the broker, 69 when it cannot be
reached, 64 for a command used wrongly. Only the standard library is used.
"""

from __future__ import annotations

import argparse
import base64
import configparser
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, TextIO
from urllib.parse import quote

from txamqp09.links.redaction import hide_passwords

__all__ = ["CtlError", "main"]

DEFAULT_URL = "http://127.0.0.1:15672"
DEFAULT_CONFIG = Path("~/.config/amqp09ctl.ini")
#: Exit codes (the BSD sysexits rabbitmqctl uses).
EXIT_REFUSED, EXIT_USAGE, EXIT_UNAVAILABLE = 1, 64, 69


class CtlError(Exception):
    """A failure to report in one line, with the exit code to end with, and
    the HTTP status of the broker's refusal (None: not a refusal)."""

    def __init__(self, text: str, code: int = EXIT_REFUSED, status: Optional[int] = None) -> None:
        super().__init__(text)
        self.code = code
        self.status = status


@dataclass
class Api:
    """The management API at *url*, as *user*; *url_source* says where the
    URL came from (``--url``, ``$AMQP09CTL_URL``, a config file, the default)."""

    url: str
    user: str
    password: str
    timeout: float = 30.0
    url_source: str = "--url"

    def call(self, method: str, path: str, body: Any = None, headers: Optional[dict[str, str]] = None) -> Any:
        """Send a request; the parsed JSON answer (None when there is none).

        :raises CtlError: the broker refused (its ``reason``) or cannot be reached.
        """
        data = json.dumps(body).encode("utf-8") if body is not None else None
        request = urllib.request.Request(self.url.rstrip("/") + path, data=data, method=method)
        token = base64.b64encode(f"{self.user}:{self.password}".encode("utf-8")).decode("ascii")
        request.add_header("Authorization", f"Basic {token}")
        request.add_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            raise CtlError(_refusal(error), status=error.code) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise CtlError(
                f"cannot reach the management API at {self.url} ({self.url_source}): {reason}; "
                "give the address of a broker's --management listener with --url or AMQP09CTL_URL",
                EXIT_UNAVAILABLE,
            ) from None
        return json.loads(raw) if raw.strip() else None


def _refusal(error: urllib.error.HTTPError) -> str:
    """The broker's ``{"error", "reason"}`` as one line."""
    try:
        body = json.loads(error.read())
        reason = " ".join(str(body.get("reason", "")).split()) or body.get("error", "")
    except (ValueError, AttributeError):
        reason = error.reason
    return f"{error.code} {reason}"


def _segment(name: str) -> str:
    """A name as one URL path segment (``/`` is ``%2F``)."""
    return quote(name, safe="")


# -- output ----------------------------------------------------------------------


def _cell(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return ""
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return "[" + ", ".join(value) + "]"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _pick(row: dict[str, Any], column: str, aliases: dict[str, Callable[[dict[str, Any]], Any]]) -> Any:
    if column in aliases:
        return aliases[column](row)
    value: Any = row
    for part in column.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


@dataclass
class Output:
    """Where and how results are printed."""

    formatter: str
    quiet: bool
    out: TextIO
    err: TextIO

    def info(self, text: str) -> None:
        """rabbitmqctl's informational line (``Adding user ...``); not with -q or json."""
        if not self.quiet and self.formatter != "json":
            print(text, file=self.err)

    def table(self, rows: list[dict[str, Any]], columns: Sequence[str],
              aliases: Optional[dict[str, Callable[[dict[str, Any]], Any]]] = None) -> None:
        """Print *columns* of *rows*."""
        picked = [{column: _pick(row, column, aliases or {}) for column in columns} for row in rows]
        if self.formatter == "json":
            json.dump(picked, self.out, indent=2, ensure_ascii=False)
            self.out.write("\n")
            return
        cells = [[_cell(row[column]) for column in columns] for row in picked]
        widths = [max([len(column)] + [len(line[index]) for line in cells]) for index, column in enumerate(columns)]
        for line in [list(columns)] + cells:
            self.out.write("  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip() + "\n")


# -- commands --------------------------------------------------------------------

#: A command: its handler and how to add its arguments.
Command = tuple[Callable[[Api, argparse.Namespace, Output], None], Callable[[argparse.ArgumentParser], object], str]
COMMANDS: dict[str, Command] = {}


def command(
    name: str, help_text: str, arguments: Callable[[argparse.ArgumentParser], object] = lambda _: None
) -> Callable[..., Any]:
    """Register the decorated function as command *name*."""
    def register(handler: Callable[[Api, argparse.Namespace, Output], None]) -> Callable[[Api, argparse.Namespace, Output], None]:
        COMMANDS[name] = (handler, arguments, help_text)
        return handler
    return register


def _columns(default: Sequence[str]) -> Callable[[argparse.ArgumentParser], None]:
    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("columns", nargs="*", default=list(default), help=f"columns (default: {' '.join(default)})")
    return add


def _names(*names: str) -> Callable[[argparse.ArgumentParser], None]:
    def add(parser: argparse.ArgumentParser) -> None:
        for name in names:
            optional = name.endswith("?")
            parser.add_argument(name.rstrip("?"), nargs="?" if optional else None)
    return add


def _listing(path: str, default: Sequence[str], info: str,
             aliases: Optional[dict[str, Callable[[dict[str, Any]], Any]]] = None,
             per_vhost: bool = True) -> Callable[[Api, argparse.Namespace, Output], None]:
    def list_things(api: Api, options: argparse.Namespace, output: Output) -> None:
        where = path.format(vhost=_segment(options.vhost))
        output.info(info.format(vhost=options.vhost))
        rows = api.call("GET", where) or []
        if not per_vhost and "{vhost}" in info:
            rows = [row for row in rows if row.get("vhost") == options.vhost]
        output.table(rows, options.columns or default, aliases)
    return list_things


def _listing_help(info: str) -> str:
    """A listing's ``--help`` line from its informational line:
    ``Listing queues for vhost {vhost} ...`` -> ``list queues of the vhost (-p)``."""
    words = info.split(" ...")[0].rstrip(".").replace("Listing", "list", 1)
    for vhost in (' for vhost "{vhost}"', " for vhost {vhost}", " in vhost {vhost}"):
        words = words.replace(vhost, " of the vhost (-p)")
    return words


_QUEUE_COLUMNS = ("name", "messages")
_CONSUMER_ALIASES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "queue_name": lambda row: row.get("queue", {}).get("name"),
    "channel_pid": lambda row: row.get("channel_details", {}).get("name"),
}
_BINDING_ALIASES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "source_name": lambda row: row.get("source"),
    "source_kind": lambda row: "exchange",
    "destination_name": lambda row: row.get("destination"),
    "destination_kind": lambda row: row.get("destination_type"),
}

for _name, _path, _default, _info, _aliases, _per_vhost in (
    ("list_queues", "/api/queues/{vhost}", _QUEUE_COLUMNS, "Listing queues for vhost {vhost} ...", None, True),
    ("list_exchanges", "/api/exchanges/{vhost}", ("name", "type"), "Listing exchanges for vhost {vhost} ...", None, True),
    ("list_bindings", "/api/bindings/{vhost}",
     ("source_name", "source_kind", "destination_name", "destination_kind", "routing_key", "arguments"),
     "Listing bindings for vhost {vhost}...", _BINDING_ALIASES, True),
    ("list_connections", "/api/connections", ("user", "peer_host", "peer_port", "state"),
     "Listing connections ...", None, False),
    ("list_channels", "/api/channels", ("pid", "user", "consumer_count", "messages_unacknowledged"),
     "Listing channels ...", {"pid": lambda row: row.get("name")}, False),
    ("list_consumers", "/api/consumers/{vhost}",
     ("queue_name", "channel_pid", "consumer_tag", "ack_required", "prefetch_count", "active", "arguments"),
     "Listing consumers in vhost {vhost} ...", _CONSUMER_ALIASES, True),
    ("list_users", "/api/users", ("user", "tags"), "Listing users ...", {"user": lambda row: row.get("name")}, False),
    ("list_vhosts", "/api/vhosts", ("name",), "Listing vhosts ...", None, False),
    ("list_permissions", "/api/vhosts/{vhost}/permissions", ("user", "configure", "write", "read"),
     "Listing permissions for vhost \"{vhost}\" ...", None, True),
    ("list_topic_permissions", "/api/vhosts/{vhost}/topic-permissions", ("user", "exchange", "write", "read"),
     "Listing topic permissions for vhost \"{vhost}\" ...", None, True),
    ("list_policies", "/api/policies/{vhost}", ("vhost", "name", "pattern", "apply-to", "definition", "priority"),
     "Listing policies for vhost \"{vhost}\" ...", None, True),
    ("list_operator_policies", "/api/operator-policies/{vhost}",
     ("vhost", "name", "pattern", "apply-to", "definition", "priority"),
     "Listing operator policy overrides for vhost \"{vhost}\" ...", None, True),
    ("list_parameters", "/api/parameters", ("component", "name", "value"),
     "Listing runtime parameters for vhost \"{vhost}\" ...", None, False),
):
    command(_name, _listing_help(_info), _columns(_default))(
        _listing(_path, _default, _info, _aliases, _per_vhost))


_SHOVEL_COLUMNS = ("name", "vhost", "type", "state", "source", "destination", "termination_reason")
_SHOVEL_ALIASES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "source": lambda row: row.get("src_uri", ""),
    "destination": lambda row: row.get("dest_uri", ""),
    "source_protocol": lambda row: row.get("src_protocol", ""),
    "destination_protocol": lambda row: row.get("dest_protocol", ""),
    "termination_reason": lambda row: row.get("reason", ""),
    "last_changed": lambda row: row.get("timestamp"),
}


@command("shovel_status", "show the dynamic shovels' status", _columns(_SHOVEL_COLUMNS))
def shovel_status(api: Api, options: argparse.Namespace, output: Output) -> None:
    """GET /api/shovels, with rabbitmqctl shovel_status's columns."""
    output.info("Shovel status ...")
    output.table(api.call("GET", "/api/shovels") or [], options.columns or _SHOVEL_COLUMNS, _SHOVEL_ALIASES)


def _node_name(api: Api) -> str:
    """The broker's node name, from /api/overview."""
    return str((api.call("GET", "/api/overview") or {}).get("node", ""))


def _on_shovel(api: Api, options: argparse.Namespace, path: str) -> None:
    """DELETE *path* of the shovel ``options.name`` in the vhost (-p), with
    rabbitmqctl's text when there is no such shovel."""
    try:
        api.call("DELETE", f"/api/shovels/vhost/{_segment(options.vhost)}/{_segment(options.name)}{path}")
    except CtlError as error:
        if error.status != 404:
            raise
        raise CtlError(
            f"Shovel with the given name was not found on the target node '{_node_name(api)}' "
            f"and / or virtual host '{options.vhost}'"
        ) from None


@command("delete_shovel", "delete a shovel of the vhost (-p)", _names("name"))
def delete_shovel(api: Api, options: argparse.Namespace, output: Output) -> None:
    """DELETE /api/shovels/vhost/{vhost}/{name}, as rabbitmqctl's plugin command."""
    output.info(f"Deleting shovel {options.name} in vhost {options.vhost}")
    _on_shovel(api, options, "")


@command("restart_shovel", "restart a dynamic shovel of the vhost (-p)", _names("name"))
def restart_shovel(api: Api, options: argparse.Namespace, output: Output) -> None:
    """DELETE /api/shovels/vhost/{vhost}/{name}/restart, as rabbitmqctl's plugin command."""
    output.info(f"Restarting dynamic Shovel {options.name} in virtual host {options.vhost} on node {_node_name(api)}")
    _on_shovel(api, options, "/restart")


@command("list_user_permissions", "list a user's permissions", _names("user"))
def list_user_permissions(api: Api, options: argparse.Namespace, output: Output) -> None:
    """The permissions of one user on every vhost."""
    output.info(f'Listing permissions for user "{options.user}" ...')
    output.table(api.call("GET", f"/api/users/{_segment(options.user)}/permissions"),
                 ("vhost", "configure", "write", "read"))


@command("status", "show the broker's status")
def status(api: Api, options: argparse.Namespace, output: Output) -> None:
    """The node, its versions and listeners, from /api/overview."""
    overview = api.call("GET", "/api/overview")
    if output.formatter == "json":
        json.dump(overview, output.out, indent=2)
        output.out.write("\n")
        return
    output.out.write(f"Status of node {overview.get('node')} ...\n")
    for label, key in (("Product", "product_name"), ("Version", "product_version"),
                       ("RabbitMQ API version", "rabbitmq_version"), ("Cluster name", "cluster_name")):
        if key in overview:
            output.out.write(f"{label}: {overview[key]}\n")
    totals = overview.get("object_totals", {})
    for name in ("connections", "channels", "exchanges", "queues", "consumers"):
        if name in totals:
            output.out.write(f"{name.capitalize()}: {totals[name]}\n")
    for listener in overview.get("listeners", []):
        output.out.write(f"Listener: {listener.get('ip_address')}:{listener.get('port')}, protocol: {listener.get('protocol')}\n")


#: What each listener protocol is for, as rabbitmqctl cluster_status says.
_PURPOSES = {
    "amqp": "AMQP 0-9-1 and AMQP 1.0",
    "amqp/ssl": "AMQP 0-9-1 and AMQP 1.0 over TLS",
    "http": "HTTP API",
    "https": "HTTP API over TLS (HTTPS)",
    "http/prometheus": "Prometheus exporter API over HTTP",
}


@command("cluster_status", "show the nodes of the broker's group, which run and their roles")
def cluster_status(api: Api, options: argparse.Namespace, output: Output) -> None:
    """rabbitmqctl cluster_status's sections from /api/overview and /api/nodes,
    with the roles of a group's members (a broker alone is one running disk node)."""
    overview = api.call("GET", "/api/overview") or {}
    nodes = sorted(api.call("GET", "/api/nodes") or [], key=lambda node: str(node.get("name")))
    output.info(f"Cluster status of node {overview.get('node')} ...")
    status = _cluster_status(overview, nodes)
    if output.formatter == "json":
        json.dump(status, output.out, indent=2, ensure_ascii=False)
        output.out.write("\n")
        return
    output.out.write("\n".join(_cluster_lines(status)) + "\n")


def _cluster_status(overview: dict[str, Any], nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """The group as rabbitmqctl cluster_status's JSON has it, and the roles."""
    own = overview.get("node")
    listeners = {own: [_listener(listener) for listener in overview.get("listeners", [])]} if own else {}
    for node in nodes:
        if node.get("name") != own and node.get("group_listeners"):
            listeners[node["name"]] = [_listener(listener) for listener in node["group_listeners"]]
    alarms = [
        f"{resource} alarm on node {node.get('name')}"
        for node in nodes
        for resource, key in (("Memory", "mem_alarm"), ("Free disk space", "disk_free_alarm"))
        if node.get(key)
    ]
    return {
        "cluster_name": overview.get("cluster_name"),
        "disk_nodes": [node["name"] for node in nodes if node.get("type") == "disc"],
        "running_nodes": [node["name"] for node in nodes if node.get("running")],
        "roles": {node["name"]: _role(node) for node in nodes if "role" in node},
        "versions": {own: {"name": overview.get("product_name"), "version": overview.get("product_version"),
                           "python_version": overview.get("erlang_version")}} if own else {},
        "alarms": alarms,
        "partitions": {},
        "listeners": listeners,
    }


def _listener(listener: dict[str, Any]) -> dict[str, Any]:
    """A listener of /api/overview or /api/nodes as cluster_status's JSON lists it."""
    protocol = listener.get("protocol", "")
    return {"interface": listener.get("ip_address"), "port": listener.get("port"), "protocol": protocol,
            "purpose": _PURPOSES.get(protocol, protocol)}


def _role(node: dict[str, Any]) -> dict[str, Any]:
    """A group member's role, lease and store round trip from its /api/nodes entry."""
    return {key: node.get(key) for key in ("role", "lease_epoch", "lease_expires", "last_seen", "store_round_trip")}


def _cluster_lines(status: dict[str, Any]) -> list[str]:
    """cluster_status's text: one titled section after another."""
    def section(title: str, lines: list[str]) -> list[str]:
        return ["", title, ""] + (lines or ["(none)"])

    return (
        ["Basics", "", f"Cluster name: {status['cluster_name']}"]
        + section("Disk Nodes", status["disk_nodes"])
        + section("Running Nodes", status["running_nodes"])
        + (section("Group Roles", [_role_line(name, role) for name, role in status["roles"].items()])
           if status["roles"] else [])
        + section("Versions", [f"{node}: {version['name']} {version['version']} on Python {version['python_version']}"
                               for node, version in status["versions"].items()])
        + section("Alarms", status["alarms"])
        + section("Network Partitions", [])
        + section("Listeners", [
            f"Node: {node}, interface: {listener['interface']}, port: {listener['port']}, "
            f"protocol: {listener['protocol']}, purpose: {listener['purpose']}"
            for node, listeners in status["listeners"].items() for listener in listeners
        ])
    )


def _role_line(name: str, role: dict[str, Any]) -> str:
    """One member's line of the Group Roles section."""
    parts = [f"Node: {name}, role: {role['role']}"]
    if role["lease_epoch"] is not None:
        parts.append(f"lease epoch: {role['lease_epoch']}, lease expires: {role['lease_expires']}")
    if role["store_round_trip"] is not None:
        parts.append(f"store round trip: {role['store_round_trip'] * 1000:.1f} ms")
    if role["last_seen"] is not None:
        parts.append(f"last seen: {role['last_seen']}")
    return ", ".join(parts)


#: The columns of federation_status (RabbitMQ's keys; ``last_changed`` is the timestamp).
_FEDERATION_COLUMNS = ("type", "vhost", "exchange", "upstream_exchange", "queue", "upstream_queue", "upstream",
                       "status", "local_connection", "uri", "error", "last_changed")


@command("federation_status", "show the federation links' status",
         lambda p: p.add_argument("--only-down", action="store_true",
                                  help="only links that failed or are not connected"))
def federation_status(api: Api, options: argparse.Namespace, output: Output) -> None:
    """The federation links from /api/federation-links, as rabbitmqctl shows them."""
    node = _node_name(api)
    down = " which are down" if options.only_down else ""
    output.info(f"Listing federation links{down} on node {node}...")
    links = api.call("GET", "/api/federation-links/state/down" if options.only_down else "/api/federation-links")
    rows = [{**{column: "" for column in _FEDERATION_COLUMNS}, **link, "last_changed": link.get("timestamp", "")}
            for link in links or []]
    output.table(rows, _FEDERATION_COLUMNS)


@command("await_startup", "wait until the broker answers", lambda p: p.add_argument("--wait-timeout", type=float, default=60.0))
def await_startup(api: Api, options: argparse.Namespace, output: Output) -> None:
    """Ask /api/overview until it answers or the timeout passes."""
    deadline = time.monotonic() + options.wait_timeout
    while True:
        try:
            api.call("GET", "/api/overview")
            return
        except CtlError as error:
            if error.code != EXIT_UNAVAILABLE or time.monotonic() >= deadline:
                raise
        time.sleep(0.2)


@command("add_user", "add a user", _names("username", "password"))
def add_user(api: Api, options: argparse.Namespace, output: Output) -> None:
    """PUT /api/users/{name}, refusing one that exists (as rabbitmqctl)."""
    output.info(f'Adding user "{options.username}" ...')
    if _exists(api, f"/api/users/{_segment(options.username)}"):
        raise CtlError(f"user '{options.username}' already exists")
    api.call("PUT", f"/api/users/{_segment(options.username)}", {"password": options.password, "tags": ""})


def _exists(api: Api, path: str) -> bool:
    try:
        api.call("GET", path)
    except CtlError as error:
        if str(error).startswith("404 "):
            return False
        raise
    return True


@command("delete_user", "delete a user", _names("username"))
def delete_user(api: Api, options: argparse.Namespace, output: Output) -> None:
    """DELETE /api/users/{name}."""
    output.info(f'Deleting user "{options.username}" ...')
    api.call("DELETE", f"/api/users/{_segment(options.username)}")


@command("change_password", "change a user's password", _names("username", "password"))
def change_password(api: Api, options: argparse.Namespace, output: Output) -> None:
    """Keep the user's tags, set a new password."""
    output.info(f'Changing password for user "{options.username}" ...')
    path = f"/api/users/{_segment(options.username)}"
    user = api.call("GET", path)
    api.call("PUT", path, {"password": options.password, "tags": user["tags"]})


@command("set_user_tags", "set a user's tags", lambda p: (p.add_argument("username"), p.add_argument("tags", nargs="*")))
def set_user_tags(api: Api, options: argparse.Namespace, output: Output) -> None:
    """Keep the user's password hash, set the tags."""
    output.info(f'Setting tags for user "{options.username}" to [{", ".join(options.tags)}] ...')
    path = f"/api/users/{_segment(options.username)}"
    user = api.call("GET", path)
    api.call("PUT", path, {"password_hash": user["password_hash"], "hashing_algorithm": user["hashing_algorithm"],
                           "tags": options.tags})


def _vhost_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name")
    parser.add_argument("--description")
    parser.add_argument("--tags")
    parser.add_argument("--default-queue-type", choices=("classic", "quorum", "stream"))


@command("add_vhost", "add a virtual host", _vhost_arguments)
def add_vhost(api: Api, options: argparse.Namespace, output: Output) -> None:
    """PUT /api/vhosts/{name}."""
    output.info(f'Adding vhost "{options.name}" ...')
    body = {key: value for key, value in (("description", options.description), ("tags", options.tags),
                                          ("default_queue_type", options.default_queue_type)) if value is not None}
    api.call("PUT", f"/api/vhosts/{_segment(options.name)}", body)


@command("delete_vhost", "delete a virtual host and everything in it", _names("name"))
def delete_vhost(api: Api, options: argparse.Namespace, output: Output) -> None:
    """DELETE /api/vhosts/{name}."""
    output.info(f'Deleting vhost "{options.name}" ...')
    api.call("DELETE", f"/api/vhosts/{_segment(options.name)}")


@command("set_permissions", "set a user's permissions on the vhost (-p)", _names("username", "conf", "write", "read"))
def set_permissions(api: Api, options: argparse.Namespace, output: Output) -> None:
    """PUT /api/permissions/{vhost}/{user}."""
    output.info(f'Setting permissions for user "{options.username}" in vhost "{options.vhost}" ...')
    api.call("PUT", f"/api/permissions/{_segment(options.vhost)}/{_segment(options.username)}",
             {"configure": options.conf, "write": options.write, "read": options.read})


@command("clear_permissions", "clear a user's permissions on the vhost (-p)", _names("username"))
def clear_permissions(api: Api, options: argparse.Namespace, output: Output) -> None:
    """DELETE /api/permissions/{vhost}/{user}."""
    output.info(f'Clearing permissions for user "{options.username}" in vhost "{options.vhost}" ...')
    api.call("DELETE", f"/api/permissions/{_segment(options.vhost)}/{_segment(options.username)}")


@command("set_topic_permissions", "set a user's topic permissions on an exchange",
         _names("username", "exchange", "write", "read"))
def set_topic_permissions(api: Api, options: argparse.Namespace, output: Output) -> None:
    """PUT /api/topic-permissions/{vhost}/{user}."""
    output.info(f'Setting topic permissions on "{options.exchange}" for user "{options.username}" '
                f'in vhost "{options.vhost}" ...')
    api.call("PUT", f"/api/topic-permissions/{_segment(options.vhost)}/{_segment(options.username)}",
             {"exchange": options.exchange, "write": options.write, "read": options.read})


@command("clear_topic_permissions", "clear a user's topic permissions", _names("username", "exchange?"))
def clear_topic_permissions(api: Api, options: argparse.Namespace, output: Output) -> None:
    """DELETE /api/topic-permissions/{vhost}/{user}[/{exchange}]."""
    output.info(f'Clearing topic permissions for user "{options.username}" in vhost "{options.vhost}" ...')
    path = f"/api/topic-permissions/{_segment(options.vhost)}/{_segment(options.username)}"
    if options.exchange:
        path += "/" + _segment(options.exchange)
    api.call("DELETE", path)


def _policy_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name")
    parser.add_argument("pattern")
    parser.add_argument("definition", help="a JSON object, e.g. '{\"message-ttl\": 60000}'")
    parser.add_argument("--priority", type=int, default=0)
    parser.add_argument("--apply-to", default="all")


def _json_argument(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise CtlError(f"{what} is not valid JSON: {error}", EXIT_USAGE) from None


def _set_policy(kind: str) -> Callable[[Api, argparse.Namespace, Output], None]:
    def set_policy(api: Api, options: argparse.Namespace, output: Output) -> None:
        output.info(f'Setting policy "{options.name}" for pattern "{options.pattern}" to "{options.definition}" '
                    f'with priority "{options.priority}" for vhost "{options.vhost}" ...')
        body = {"pattern": options.pattern, "definition": _json_argument(options.definition, "the definition"),
                "priority": options.priority, "apply-to": options.apply_to}
        api.call("PUT", f"/api/{kind}/{_segment(options.vhost)}/{_segment(options.name)}", body)
    return set_policy


def _clear_policy(kind: str) -> Callable[[Api, argparse.Namespace, Output], None]:
    def clear_policy(api: Api, options: argparse.Namespace, output: Output) -> None:
        output.info(f'Clearing policy "{options.name}" on vhost "{options.vhost}" ...')
        api.call("DELETE", f"/api/{kind}/{_segment(options.vhost)}/{_segment(options.name)}")
    return clear_policy


command("set_policy", "set a policy on the vhost (-p)", _policy_arguments)(_set_policy("policies"))
command("clear_policy", "clear a policy", _names("name"))(_clear_policy("policies"))
command("set_operator_policy", "set an operator policy", _policy_arguments)(_set_policy("operator-policies"))
command("clear_operator_policy", "clear an operator policy", _names("name"))(_clear_policy("operator-policies"))


def _set_limits(kind: str) -> Callable[[Api, argparse.Namespace, Output], None]:
    def set_limits(api: Api, options: argparse.Namespace, output: Output) -> None:
        name = options.vhost if kind == "vhost" else options.username
        output.info(f'Applying {kind} limits to "{name}" ...')
        limits = _json_argument(options.definition, "the limits")
        if not isinstance(limits, dict):
            raise CtlError("the limits must be a JSON object, e.g. '{\"max-connections\": 64}'", EXIT_USAGE)
        base = f"/api/{kind}-limits/{_segment(name)}"
        for limit, value in limits.items():
            api.call("PUT", f"{base}/{_segment(limit)}", {"value": value})
    return set_limits


command("set_vhost_limits", "set the vhost's (-p) limits from a JSON object", _names("definition"))(_set_limits("vhost"))
command("set_user_limits", "set a user's limits from a JSON object", _names("username", "definition"))(_set_limits("user"))


@command("clear_vhost_limits", "clear the vhost's (-p) limits")
def clear_vhost_limits(api: Api, options: argparse.Namespace, output: Output) -> None:
    """DELETE every limit of the vhost."""
    output.info(f'Clearing vhost "{options.vhost}" limits ...')
    for entry in api.call("GET", f"/api/vhost-limits/{_segment(options.vhost)}"):
        for limit in entry["value"]:
            api.call("DELETE", f"/api/vhost-limits/{_segment(options.vhost)}/{_segment(limit)}")


@command("set_parameter", "set a runtime parameter", _names("component", "name", "value"))
def set_parameter(api: Api, options: argparse.Namespace, output: Output) -> None:
    """PUT /api/parameters/{component}/{vhost}/{name}."""
    output.info(f'Setting runtime parameter "{options.name}" for component "{options.component}" to '
                f'"{hide_passwords(options.value)}" in vhost "{options.vhost}" ...')
    value = _json_argument(options.value, "the value")
    api.call("PUT", f"/api/parameters/{_segment(options.component)}/{_segment(options.vhost)}/{_segment(options.name)}",
             {"value": value})


@command("clear_parameter", "clear a runtime parameter", _names("component", "name"))
def clear_parameter(api: Api, options: argparse.Namespace, output: Output) -> None:
    """DELETE /api/parameters/{component}/{vhost}/{name}."""
    output.info(f'Clearing runtime parameter "{options.name}" for component "{options.component}" '
                f'on vhost "{options.vhost}" ...')
    api.call("DELETE", f"/api/parameters/{_segment(options.component)}/{_segment(options.vhost)}/{_segment(options.name)}")


@command("set_cluster_name", "set the broker's cluster name (federation tells brokers apart by it)",
         _names("name"))
def set_cluster_name(api: Api, options: argparse.Namespace, output: Output) -> None:
    """PUT /api/global-parameters/cluster_name."""
    output.info(f"Setting cluster name to {options.name} ...")
    api.call("PUT", "/api/global-parameters/cluster_name", {"value": options.name})


@command("export_definitions", "write the definitions to FILE (- for stdout)", _names("file"))
def export_definitions(api: Api, options: argparse.Namespace, output: Output) -> None:
    """GET /api/definitions."""
    definitions = api.call("GET", "/api/definitions")
    text = json.dumps(definitions, indent=2, ensure_ascii=False) + "\n"
    if options.file == "-":
        output.out.write(text)
        return
    output.info(f'Exporting definitions in JSON to a file at "{options.file}" ...')
    Path(options.file).write_text(text, encoding="utf-8")


@command("import_definitions", "import the definitions of FILE (- for stdin)", _names("file"))
def import_definitions(api: Api, options: argparse.Namespace, output: Output) -> None:
    """POST /api/definitions; what the broker did not apply is printed on stderr."""
    try:
        text = sys.stdin.read() if options.file == "-" else Path(options.file).read_text(encoding="utf-8")
    except OSError as error:
        raise CtlError(f"cannot read {options.file}: {error.strerror}", EXIT_USAGE) from None
    output.info(f'Importing definitions in JSON from a file at "{options.file}" ...')
    answer = api.call("POST", "/api/definitions", _json_argument(text, options.file))
    for item in (answer or {}).get("unsupported", []):
        print(f"not applied: {item}", file=output.err)


@command("close_connection", "close a connection", _names("connection", "explanation"))
def close_connection(api: Api, options: argparse.Namespace, output: Output) -> None:
    """DELETE /api/connections/{name} with the explanation as the reason."""
    output.info(f'Closing connection {options.connection}, reason: {options.explanation}...')
    api.call("DELETE", f"/api/connections/{_segment(options.connection)}", headers={"X-Reason": options.explanation})


@command("purge_queue", "purge a queue of the vhost (-p)", _names("queue"))
def purge_queue(api: Api, options: argparse.Namespace, output: Output) -> None:
    """DELETE /api/queues/{vhost}/{name}/contents."""
    output.info(f'Purging queue \'{options.queue}\' in vhost \'{options.vhost}\' ...')
    api.call("DELETE", f"/api/queues/{_segment(options.vhost)}/{_segment(options.queue)}/contents")


def _delete_queue_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue")
    parser.add_argument("--if-empty", "-e", action="store_true")
    parser.add_argument("--if-unused", "-u", action="store_true")


@command("delete_queue", "delete a queue of the vhost (-p)", _delete_queue_arguments)
def delete_queue(api: Api, options: argparse.Namespace, output: Output) -> None:
    """DELETE /api/queues/{vhost}/{name}."""
    output.info(f"Deleting queue '{options.queue}' on vhost '{options.vhost}' ...")
    flags = [name for name, given in (("if-empty", options.if_empty), ("if-unused", options.if_unused)) if given]
    query = ("?" + "&".join(f"{flag}=true" for flag in flags)) if flags else ""
    api.call("DELETE", f"/api/queues/{_segment(options.vhost)}/{_segment(options.queue)}{query}")


# -- the program -------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="amqp09ctl", description="Manage a txamqp09 broker through its management HTTP API.")
    parser.add_argument("--url", dest="api_url", metavar="URL", help=f"the management API (default $AMQP09CTL_URL, the config file, or {DEFAULT_URL})")
    parser.add_argument("--user", "-u", dest="api_user", metavar="USER", help="user name (default $AMQP09CTL_USER, the config file, or guest)")
    parser.add_argument("--password", dest="api_password", metavar="PASSWORD", help="password (default $AMQP09CTL_PASSWORD, the config file, or guest)")
    parser.add_argument("--config", help=f"an INI file with an [amqp09ctl] section (default {DEFAULT_CONFIG})")
    parser.add_argument("--vhost", "-p", default="/", help="the virtual host (default /)")
    parser.add_argument("--formatter", choices=("table", "json"), default="table")
    parser.add_argument("--quiet", "-q", action="store_true", help="no informational lines")
    parser.add_argument("--timeout", "-t", type=float, default=30.0, help="seconds to wait for each answer")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    for name, (_, arguments, help_text) in sorted(COMMANDS.items()):
        sub = commands.add_parser(name, help=help_text)
        arguments(sub)
    return parser


def _settings(options: argparse.Namespace, environ: dict[str, str]) -> Api:
    config = configparser.ConfigParser()
    path = Path(options.config) if options.config else DEFAULT_CONFIG.expanduser()
    if options.config and not path.is_file():
        raise CtlError(f"no config file {path}", EXIT_USAGE)
    config.read(path)
    section = config["amqp09ctl"] if config.has_section("amqp09ctl") else {}

    def setting(name: str, default: str) -> tuple[str, str]:
        """The setting *name* and where it came from."""
        given = getattr(options, f"api_{name}")
        if given is not None:
            return str(given), f"--{name}"
        variable = f"AMQP09CTL_{name.upper()}"
        if environ.get(variable):
            return environ[variable], f"${variable}"
        if section.get(name):
            return section[name], f"{name} in {path}"
        return default, "the default"

    url, url_source = setting("url", DEFAULT_URL)
    return Api(url, setting("user", "guest")[0], setting("password", "guest")[0], options.timeout, url_source)


def main(argv: Optional[Sequence[str]] = None, environ: Optional[dict[str, str]] = None,
         out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Run one command; the exit code."""
    parser = _parser()
    try:
        options = parser.parse_args(argv)
    except SystemExit as exit:
        return EXIT_USAGE if exit.code else 0
    output = Output(options.formatter, options.quiet, out, err)
    try:
        api = _settings(options, dict(os.environ) if environ is None else environ)
        COMMANDS[options.command][0](api, options, output)
    except CtlError as error:
        print(f"Error: {error}", file=err)
        return error.code
    return 0


if __name__ == "__main__":
    sys.exit(main())
