"""The broker's group as the operations layer shows it.

A broker started with a PostgreSQL store is a member of a group
(:mod:`txamqp09.group`): one member is *active* and serves AMQP, the others
are *standbys*. Its :class:`~txamqp09.management.node.Node` then has a
:class:`~txamqp09.management.node.GroupView` (the
:class:`~txamqp09.group.service.GroupService`), from which this module
makes what ``/api/nodes``, ``amqp09ctl cluster_status`` and the metrics
show: :func:`node_entries`, one entry per member, each with RabbitMQ's
keys and the group's own (:data:`GROUP_KEYS`); :func:`serving`, whether
this member serves; :func:`member_running`, whether a member takes part.

A broker alone (SQLite, or nothing kept) has no view: it serves, and
``/api/nodes`` lists it alone, as before. This module reads the group's
status only; at run time it imports nothing of :mod:`txamqp09.group`
but its records (:mod:`txamqp09.group.records`), and so not psycopg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from txamqp09.group.records import iso_moment, member_named

if TYPE_CHECKING:
    from txamqp09.group.records import Member
    from txamqp09.group.service import GroupStatus
    from txamqp09.management.node import Node

__all__ = ["GROUP_KEYS", "active_member", "member_running", "node_entries", "role", "serving"]

#: The roles of members that take part in the group (a fenced or stopped
#: one has left it).
_TAKING_PART = frozenset({"active", "standby"})

#: The keys each ``/api/nodes`` entry of a group member has beyond RabbitMQ's.
GROUP_KEYS = (
    "role",
    "lease_epoch",
    "lease_expires",
    "last_seen",
    "store_round_trip",
    "group_listeners",
)


def role(node: Node) -> Optional[str]:
    """*node*'s role in its group (``active``, ``standby``, ``fenced``,
    ``stopped``), or None for a broker alone."""
    return node.group.status().role.value if node.group is not None else None


def serving(node: Node) -> bool:
    """Whether *node* serves AMQP: alone, or the active member of its group."""
    return node.group is None or node.group.serving


def member_running(status: GroupStatus, member: Member, period: float) -> bool:
    """Whether *member* takes part in the group now: its row says active or
    standby and it wrote the row within the last lease *period* (by the
    database's clock, as read with the lease)."""
    if member.role not in _TAKING_PART or member.last_seen is None or status.lease is None:
        return False
    return (status.lease.now - member.last_seen).total_seconds() <= period


def active_member(status: GroupStatus) -> str:
    """Which member is active and where its AMQP listeners are, in words."""
    lease = status.lease
    if lease is None or lease.free:
        return "no broker is active at the moment"
    holder = member_named(status.members, lease.holder)
    listeners = ", ".join(f"{address.host}:{address.port}" for address in holder.amqp_addresses()) if holder else ""
    return f"the active broker is {lease.holder}" + (f" (AMQP on {listeners})" if listeners else "")


def _group_keys(status: GroupStatus, name: str, row_role: str, member: Optional[Member]) -> dict[str, Any]:
    """The :data:`GROUP_KEYS` of member *name* whose role is *row_role*
    (``active`` while it holds the unexpired lease: its row says so only
    from its first renewal on)."""
    lease = status.lease
    holds = lease is not None and lease.holder == name and not lease.free
    return {
        "role": "active" if holds else row_role,
        "lease_epoch": lease.epoch if holds and lease is not None else None,
        "lease_expires": iso_moment(lease.expires) if holds and lease is not None else None,
        "last_seen": iso_moment(member.last_seen) if member is not None else None,
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
