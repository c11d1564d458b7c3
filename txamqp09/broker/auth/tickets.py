"""Access tickets (AMQP 0-8/0-9 access.request): granting them and checking them.

The specification's rules, as this module applies them:

* access.request names a realm and the rights wanted (passive, active,
  write, read, exclusive). The ticket is granted only if the user holds every
  right wanted on that realm; otherwise, and for realms that do not exist,
  the same connection exception 403 ACCESS_REFUSED follows (the 0-9 spec asks
  for an identical response so that realms cannot be probed).
* A ticket is valid on the channel that requested it, until that channel
  closes. Using it on another channel is 530 NOT_ALLOWED, a connection
  exception (0-9, access.request-ok rule "per-channel").
* Requesting a realm again on the same channel replaces the earlier ticket.
* Exclusive access may not be granted while another channel (of any
  connection) holds a ticket on the realm, unless this channel held the only
  one; while a channel holds a realm exclusively no other channel gets a
  ticket on it, nor works with its resources by any ticket. Both are 403
  ACCESS_REFUSED on the channel.
* A method's ticket must be for a realm holding the resource the method
  names, and carry the right the method needs; otherwise 403 ACCESS_REFUSED
  on the channel. Active covers passive.
* Ticket 0 (what 0-9-1 clients and most 0-8 clients always send) is accepted
  when the table is built with ``accept_ticket_zero``; the method is then
  governed by the user's vhost permissions alone, which are checked for every
  method whatever its ticket (:mod:`txamqp09.broker.auth.methods`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from txamqp09.broker.auth.cred import IAMQPUser
from txamqp09.broker.auth.errors import HardAccessRefused
from txamqp09.broker.auth.permissions import ResourceKind, checked_name
from txamqp09.broker.auth.realms import AccessRealm, Right, satisfies
from txamqp09.broker.auth.users import UserDatabase
from txamqp09.wire.errors import AccessRefused, NotAllowed, ResourceError

__all__ = ["MAX_TICKET", "RealmUsage", "Ticket", "TicketTable"]

#: Ticket numbers are 16-bit and never 0.
MAX_TICKET = 0xFFFF

_ACCESS_REQUEST = (30, 10)


@dataclass(frozen=True)
class Ticket:
    """A granted access ticket."""

    number: int
    channel: int
    realm: AccessRealm
    rights: frozenset[Right]


#: A channel of one connection: (its ticket table, channel number).
Holder = tuple["TicketTable", int]


def _shown(kind: ResourceKind, name: str) -> str:
    return f"{kind.value} {checked_name(name)!r}"


class RealmUsage:
    """Which channels, across all connections of a broker, hold tickets on which realms."""

    def __init__(self) -> None:
        #: How many times a ticket was granted or destroyed (for caches).
        self.generation = 0
        self._holders: dict[tuple[str, str], dict[Holder, bool]] = {}
        self._exclusive: dict[str, dict[str, tuple[Holder, AccessRealm]]] = {}

    def conflict(self, vhost: str, realm: str, holder: Holder, exclusive: bool) -> str | None:
        """Why ``holder`` may not have a ticket on ``realm`` now, or None if it may."""
        others = {h: ex for h, ex in self._holders.get((vhost, realm), {}).items() if h != holder}
        if any(others.values()):
            return "another channel holds it exclusively"
        if exclusive and others:
            return f"{len(others)} other channel(s) hold tickets on it, so it cannot be exclusive"
        return None

    def hold(self, vhost: str, realm: AccessRealm, holder: Holder, exclusive: bool) -> None:
        """Record that ``holder`` has a ticket on ``realm``."""
        self.generation += 1
        self._holders.setdefault((vhost, realm.name), {})[holder] = exclusive
        if exclusive:
            self._exclusive.setdefault(vhost, {})[realm.name] = (holder, realm)

    def release(self, vhost: str, realm: str, holder: Holder) -> None:
        """Record that ``holder`` no longer has a ticket on ``realm``."""
        self.generation += 1
        holders = self._holders.get((vhost, realm), {})
        holders.pop(holder, None)
        if not holders:
            self._holders.pop((vhost, realm), None)
        exclusive = self._exclusive.get(vhost, {})
        if realm in exclusive and exclusive[realm][0] == holder:
            del exclusive[realm]
            if not exclusive:
                del self._exclusive[vhost]

    def locked(self, vhost: str, kind: ResourceKind, name: str, holder: Holder) -> str | None:
        """The realm holding the resource that another channel holds exclusively, if any."""
        for realm_name, (owner, realm) in self._exclusive.get(vhost, {}).items():
            if owner != holder and realm.contains(kind, name):
                return realm_name
        return None


class TicketTable:
    """One connection's access tickets.

    :param usage: the broker's :class:`RealmUsage`, shared by all connections.
    :param database: where the vhost's realms are configured.
    :param user: the connection's avatar.
    :param vhost: the virtual host the connection opened.
    :param accept_ticket_zero: whether methods may carry ticket 0 (no ticket).
    """

    def __init__(
        self,
        usage: RealmUsage,
        database: UserDatabase,
        user: IAMQPUser,
        vhost: str,
        accept_ticket_zero: bool = True,
    ) -> None:
        self.usage = usage
        self.database = database
        self.user = user
        self.vhost = vhost
        self.accept_ticket_zero = accept_ticket_zero
        self._tickets: dict[int, Ticket] = {}
        self._by_channel: dict[tuple[int, str], int] = {}
        self._next = 1

    def request(self, channel: int, realm: str, wanted: Iterable[Right]) -> int:
        """Grant a ticket on ``realm`` for ``channel``; its number.

        :raises HardAccessRefused: the realm does not exist or the user lacks a
            wanted right (connection exception).
        :raises AccessRefused: exclusivity conflicts with another channel.
        :raises ResourceError: all 65535 ticket numbers are in use.
        """
        rights = frozenset(wanted)
        found = self.database.realms_of(self.vhost).get(realm)
        held = self.user.realm_rights(self.vhost, realm) if found is not None else frozenset()
        if found is None or not all(satisfies(held, right) for right in rights):
            raise HardAccessRefused(
                f"ACCESS_REFUSED - access to realm {realm!r} in vhost {self.vhost!r} refused "
                f"for user {self.user.name!r} with rights {sorted(r.value for r in rights)}; "
                "an administrator can grant realm rights in the definitions' realm_grants",
                *_ACCESS_REQUEST,
            )
        holder: Holder = (self, channel)
        conflict = self.usage.conflict(self.vhost, realm, holder, Right.EXCLUSIVE in rights)
        if conflict is not None:
            raise AccessRefused(f"ACCESS_REFUSED - realm {realm!r} is busy: {conflict}", *_ACCESS_REQUEST)
        self._drop(channel, realm)
        number = self._allocate()
        self._tickets[number] = Ticket(number, channel, found, rights)
        self._by_channel[channel, realm] = number
        self.usage.hold(self.vhost, found, holder, Right.EXCLUSIVE in rights)
        return number

    def _allocate(self) -> int:
        for _ in range(MAX_TICKET):
            number = self._next
            self._next = number % MAX_TICKET + 1
            if number not in self._tickets:
                return number
        raise ResourceError("all 65535 access ticket numbers of this connection are in use", *_ACCESS_REQUEST)

    def _drop(self, channel: int, realm: str) -> None:
        number = self._by_channel.pop((channel, realm), None)
        if number is not None:
            del self._tickets[number]
            self.usage.release(self.vhost, realm, (self, channel))

    def check_ticket(self, channel: int, ticket: int, kind: ResourceKind, name: str, right: Right) -> None:
        """Check that ``ticket`` lets ``channel`` use resource ``name`` with ``right``.

        :raises AccessRefused: no such ticket, the resource is outside its realm,
            the ticket lacks the right, ticket 0 is not accepted, or another
            channel holds the resource's realm exclusively.
        :raises NotAllowed: the ticket belongs to another channel.
        """
        if ticket == 0:
            if not self.accept_ticket_zero:
                raise AccessRefused(
                    f"ACCESS_REFUSED - this broker requires access tickets: call access.request "
                    f"for a realm holding {_shown(kind, name)} on channel {channel} and pass its ticket"
                )
        else:
            self._check_granted(channel, ticket, kind, name, right)
        locked = self.usage.locked(self.vhost, kind, name, (self, channel))
        if locked is not None:
            raise AccessRefused(
                f"ACCESS_REFUSED - {_shown(kind, name)} is in realm {locked!r}, which another "
                "channel holds exclusively"
            )

    def _check_granted(self, channel: int, number: int, kind: ResourceKind, name: str, right: Right) -> None:
        ticket = self._tickets.get(number)
        if ticket is None:
            raise AccessRefused(
                f"ACCESS_REFUSED - access ticket {number} is not valid on this connection "
                "(never granted, or its channel closed): call access.request first"
            )
        if ticket.channel != channel:
            raise NotAllowed(
                f"access ticket {number} was granted on channel {ticket.channel} and "
                f"may not be used on channel {channel}: request a ticket on each channel"
            )
        if not ticket.realm.contains(kind, name):
            raise AccessRefused(
                f"ACCESS_REFUSED - {_shown(kind, name)} is not in realm {ticket.realm.name!r} of access "
                f"ticket {number}: use a ticket for a realm that holds it"
            )
        if not satisfies(ticket.rights, right):
            raise AccessRefused(
                f"ACCESS_REFUSED - access ticket {number} for realm {ticket.realm.name!r} "
                f"lacks {right.value} access: call access.request with {right.value} set"
            )

    def channel_closed(self, channel: int) -> None:
        """Destroy the tickets of a closed channel."""
        for held_channel, realm in [key for key in self._by_channel if key[0] == channel]:
            self._drop(held_channel, realm)
