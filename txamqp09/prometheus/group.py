"""The metrics of a broker's group: its role, the lease and the lease statement's round trip.

Reported by every member of a group (a standby's metrics listener reports
only these and the identity, since it serves nothing else); a broker alone
reports none of them. The store's commit durations are the
``txamqp09_store_commit_seconds`` histogram, reported by the active member
whose store writes.

=============================================  ===========================================
``txamqp09_group_role{role}``                  1 for this member's role, 0 for the others
``txamqp09_group_lease_epoch``                 the lease's epoch (takeovers so far)
``txamqp09_group_lease_seconds_left``          seconds the lease had left when last read
``txamqp09_group_serving_seconds_left``        the active member: seconds until it must stop
                                               serving unless it renews
``txamqp09_group_store_round_trip_seconds``    this member's last lease statement's round trip
``txamqp09_group_members{role}``               members taking part, by role
=============================================  ===========================================
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric as Family

from txamqp09.group.records import member_named
from txamqp09.management.group import member_running

if TYPE_CHECKING:
    from txamqp09.management.node import Node

__all__ = ["ROLES", "group_families"]

#: Every role a member can have, one sample each in ``txamqp09_group_role``.
ROLES = ("active", "standby", "fenced", "stopped")


def group_families(node: Node) -> list[Family]:
    """The group's families for *node* (none for a broker alone)."""
    if node.group is None:
        return []
    status = node.group.status()
    role = GaugeMetricFamily("txamqp09_group_role", "This broker's role in its group (1: its role)", labels=("role",))
    for name in ROLES:
        role.add_metric((name,), int(status.role.value == name))
    families: list[Family] = [role]
    lease = status.lease
    if lease is not None:
        families.append(GaugeMetricFamily(
            "txamqp09_group_lease_epoch", "The group lease's epoch: how many takeovers there were", value=lease.epoch,
        ))
        families.append(GaugeMetricFamily(
            "txamqp09_group_lease_seconds_left",
            "Seconds the group lease had left when this broker last read it (0: free)", value=lease.seconds_left(),
        ))
    if status.deadline is not None:
        families.append(GaugeMetricFamily(
            "txamqp09_group_serving_seconds_left",
            "Seconds until this active broker stops serving unless it renews its lease", value=status.deadline,
        ))
    own = member_named(status.members, status.node)
    if own is not None and own.round_trip is not None:
        families.append(GaugeMetricFamily(
            "txamqp09_group_store_round_trip_seconds",
            "Seconds this broker's last lease statement took, to the database and back", value=own.round_trip,
        ))
    period = node.group.timing.period
    taking_part = Counter(member.role for member in status.members if member_running(status, member, period))
    members = GaugeMetricFamily("txamqp09_group_members", "Members of the group taking part, by role", labels=("role",))
    for name in ("active", "standby"):
        members.add_metric((name,), taking_part[name])
    families.append(members)
    return families
