"""Protocol headers and the generated spec module each one selects.

A connection starts with an 8-byte protocol header; the server picks the
version it names, or answers with its preferred header and closes, as the
specifications require for a header it does not support.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Mapping, Optional

from txamqp09.wire import _amqp0_8, _amqp0_9, _amqp0_9_1
from txamqp09.wire.base import Method, Properties
from txamqp09.wire.fields import TableCodec

__all__ = [
    "ProtocolVersion",
    "AMQP0_8",
    "AMQP0_9",
    "AMQP0_9_1",
    "VERSIONS",
    "PREFERRED",
    "HEADER_SIZE",
    "CAPABILITIES",
    "DIRECT_REPLY_TO",
    "version_for_header",
    "version_named",
]

HEADER_SIZE = 8

#: RabbitMQ's direct reply-to pseudo-queue: consumed (without
#: acknowledgement) by an RPC client, named as the reply-to of its requests.
DIRECT_REPLY_TO = "amq.rabbitmq.reply-to"

#: RabbitMQ's 0-9-1 extensions this project implements on both sides, as the
#: ``capabilities`` table of server-properties and client-properties.
CAPABILITIES = {
    "publisher_confirms": True,
    "exchange_exchange_bindings": True,
    "basic.nack": True,
    "consumer_cancel_notify": True,
    "connection.blocked": True,
    "authentication_failure_close": True,
    "per_consumer_qos": True,
}


@dataclass(frozen=True)
class ProtocolVersion:
    """One AMQP version: its header, generated module and wire details."""

    name: str
    header: bytes
    spec: ModuleType
    #: Frame types the version defines that this implementation refuses.
    reserved_frame_types: frozenset[int] = frozenset()

    @property
    def methods(self) -> Mapping[int, type[Method]]:
        """Method classes by ``method_index(class id, method id)``."""
        return self.spec.METHODS  # type: ignore[no-any-return]

    @property
    def properties(self) -> Mapping[int, type[Properties]]:
        """Content property classes by class id."""
        return self.spec.PROPERTIES  # type: ignore[no-any-return]

    @property
    def tables(self) -> TableCodec:
        """The field-table dialect of the version."""
        return self.spec.TABLES  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"<AMQP {self.name}>"


AMQP0_8 = ProtocolVersion("0-8", b"AMQP\x01\x01\x08\x00", _amqp0_8, frozenset({4, 5, 6, 7}))
AMQP0_9 = ProtocolVersion("0-9", b"AMQP\x01\x01\x00\x09", _amqp0_9, frozenset({4, 5, 6, 7}))
AMQP0_9_1 = ProtocolVersion("0-9-1", b"AMQP\x00\x00\x09\x01", _amqp0_9_1)

#: Every supported version by name.
VERSIONS: dict[str, ProtocolVersion] = {v.name: v for v in (AMQP0_8, AMQP0_9, AMQP0_9_1)}

#: The version a server offers when a client's header names none it supports.
PREFERRED = AMQP0_9_1

_BY_HEADER: dict[bytes, ProtocolVersion] = {v.header: v for v in VERSIONS.values()}
# Early 0-9-1 clients sent the 0-9 header layout with 9-1 as the version.
_BY_HEADER[b"AMQP\x01\x01\x09\x01"] = AMQP0_9_1


def version_for_header(header: bytes) -> Optional[ProtocolVersion]:
    """The version an 8-byte protocol header asks for, or None."""
    return _BY_HEADER.get(bytes(header))


def version_named(name: str) -> ProtocolVersion:
    """A version by its name: "0-8", "0-9" or "0-9-1".

    :raises ValueError: an unknown name.
    """
    try:
        return VERSIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown AMQP version {name!r}; choose one of {', '.join(VERSIONS)}"
        ) from None
