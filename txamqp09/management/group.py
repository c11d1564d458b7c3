"""The broker's group as the operations layer shows it.

A broker started with a PostgreSQL store is a member of a group
(:mod:`txamqp09.group`): one member is *active* and serves AMQP, the others
are *standbys*. Its :class:`~txamqp09.management.node.Node` then has a
:class:`GroupView` (the :class:`~txamqp09.group.service.GroupService`),
from which this module makes what the management API, the metrics and the
web UI show:

- :func:`node_entries`: ``/api/nodes``, one entry per member, each with
  RabbitMQ's keys and the group's own (:data:`GROUP_KEYS`);
- :func:`overview_group`: the ``group`` object of ``/api/overview``;
- :func:`serving` and :func:`not_serving`: whether this member serves, and
  the 503 its management API answers with while it does not, for
  everything but the few routes a standby serves (those registered with
  ``standby=True``).

A broker alone (SQLite, or nothing kept) has no view: it serves, and
``/api/nodes`` lists it alone, as before. This module reads the group's
status only; it never imports :mod:`txamqp09.group` (and so psycopg) at
run time.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Optional, Protocol

from txamqp09.management.api import ApiError

if TYPE_CHECKING:
    from txamqp09.group.keeper import LeaseTiming
    from txamqp09.group.lease import Member
    from txamqp09.group.service import GroupStatus
    from txamqp09.management.node import Node

__all__ = [
    "ACTIVE",
    "GROUP_KEYS",
    "GroupView",
    "member_running",
    "node_entries",
    "not_serving",
    "overview_group",
    "role",
    "serving",
]

#: The role of the member that serves.
ACTIVE = "active"
#: The roles of members that take part in the group (a fenced or stopped
#: one has left it).
_TAKING_PART = frozenset({ACTIVE, "standby"})

#: The keys each ``/api/nodes`` entry of a group member has beyond RabbitMQ's.
GROUP_KEYS = (
    "role",
    "lease_epoch",
    "lease_expires",
    "last_seen",
    "store_round_trip",
    "group_listeners",
)


class GroupView(Protocol):
    """What the operations layer reads of its broker's group
    (:class:`~txamqp09.group.service.GroupService` offers it).

    :ivar timing: the lease period and renewal interval.
    """

    timing: LeaseTiming

    def status(self) -> GroupStatus:
        """The group as this member last saw it."""


def role(node: Node) -> Optional[str]:
    """*node*'s role in its group (``active``, ``standby``, ``fenced``,
    ``stopped``), or None for a broker alone."""
    return node.group.status().role.value if node.group is not None else None


def serving(node: Node) -> bool:
    """Whether *node* serves AMQP: alone, or the active member of its group."""
    return role(node) in (None, ACTIVE)


def not_serving(node: Node) -> ApiError:
    """The 503 a member that does not serve answers a request with, naming
    its role and, when known, the active member and its AMQP listeners."""
    assert node.group is not None
    status = node.group.status()
    active = _active_member(status)
    if active is None:
        where = "no member of the group serves at the moment"
    else:
        listeners = ", ".join(
            f"{address.host}:{address.port}" for address in active.addresses if address.protocol.startswith("amqp")
        )
        where = f"the active member is {active.node}" + (f" (AMQP on {listeners})" if listeners else "")
    return ApiError(
        503,
        status.role.value,
        f"this broker ({status.node}) is a {status.role.value} member of its group and serves only "
        f"/api/overview, /api/nodes, /api/whoami and the health checks; {where}",
    )


def _active_member(status: GroupStatus) -> Optional[Member]:
    """The member holding the lease, when it is unexpired and its row is known."""
    lease = status.lease
    if lease is None or lease.free:
        return None
    return next((member for member in status.members if member.node == lease.holder), None)


def member_running(status: GroupStatus, member: Member, period: float) -> bool:
    """Whether *member* takes part in the group now: its row says active or
    standby and it wrote the row within the last lease *period* (by the
    database's clock, as read with the lease)."""
    if member.role not in _TAKING_PART or member.last_seen is None or status.lease is None:
        return False
    return (status.lease.now - member.last_seen).total_seconds() <= period


def _iso(moment: Optional[datetime]) -> Optional[str]:
    return moment.isoformat() if moment is not None else None


def _group_keys(status: GroupStatus, name: str, row_role: str, member: Optional[Member]) -> dict[str, Any]:
    """The :data:`GROUP_KEYS` of member *name* whose role is *row_role*."""
    lease = status.lease
    holds = lease is not None and lease.holder == name and not lease.free
    return {
        "role": row_role,
        "lease_epoch": lease.epoch if holds and lease is not None else None,
        "lease_expires": _iso(lease.expires) if holds and lease is not None else None,
        "last_seen": _iso(member.last_seen) if member is not None else None,
        "store_round_trip": member.round_trip if member is not None else None,
        "group_listeners": [
            {"protocol": address.protocol, "ip_address": address.host, "port": address.port}
            for address in (member.addresses if member is not None else ())
        ],
    }


def node_entries(node: Node, own: dict[str, Any]) -> list[dict[str, Any]]:
    """``/api/nodes``: *own* (this node's entry) alone for a broker alone;
    in a group, every member's entry with the group's keys, this node's
    being *own* and the others' RabbitMQ's keys of a node this one does not
    run (``name``, ``type``, ``running``, ``being_drained``)."""
    if node.group is None:
        return [own]
    status = node.group.status()
    period = node.group.timing.period
    rows = {member.node: member for member in status.members}
    entries = [{**own, **_group_keys(status, node.name, status.role.value, rows.get(node.name))}]
    for member in status.members:
        if member.node != node.name:
            entries.append({
                "name": member.node,
                "type": "disc",
                "running": member_running(status, member, period),
                "being_drained": False,
                **_group_keys(status, member.node, member.role, member),
            })
    return entries


def overview_group(node: Node) -> Optional[dict[str, Any]]:
    """The ``group`` object of ``/api/overview`` (None for a broker alone):
    this member's role, the lease (holder, epoch, expiry, seconds left as
    last read) and the members' names and roles."""
    if node.group is None:
        return None
    status = node.group.status()
    lease = status.lease
    return {
        "node": status.node,
        "role": status.role.value,
        "lease": None if lease is None else {
            "holder": None if lease.free else lease.holder,
            "epoch": lease.epoch,
            "expires": _iso(lease.expires),
            "seconds_left": lease.seconds_left(),
        },
        "members": [{"name": member.node, "role": member.role} for member in status.members],
        "lease_session_error": status.session_error,
    }
