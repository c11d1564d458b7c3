"""Whether a member's AMQP listeners still accept connections.

A standby that learns that the active's lease session ended does not know
whether the active died or only lost its session (an operator's
``pg_terminate_backend``, a network fault): in the second case the active
stops serving on its own, and the standby must not start before it has.
It asks the active's listeners: a refused connection means nobody serves
there any more; an accepted one (closed again at once) that somebody
still does; no answer at all proves nothing, and the lease's expiry
decides.
"""

from __future__ import annotations

import enum
import socket
from typing import Iterable

from txamqp09.group.records import Address

__all__ = ["Listening", "listening"]


class Listening(enum.Enum):
    """What the listeners of a member said."""

    #: Every one refused: nobody serves there.
    NO = "no"
    #: One accepted a connection: it still serves.
    YES = "yes"
    #: Some did not answer in time, or there was nothing to probe: unknown.
    UNKNOWN = "unknown"


def listening(addresses: Iterable[Address], timeout: float) -> Listening:
    """Connect to each of *addresses* (giving up after *timeout* seconds
    each) and close again; what they said together. No address to probe
    (a member that has not recorded its listeners yet) tells nothing:
    :attr:`Listening.UNKNOWN`."""
    addresses = list(addresses)
    answer = Listening.NO if addresses else Listening.UNKNOWN
    for address in addresses:
        try:
            with socket.create_connection((address.host, address.port), timeout=timeout):
                return Listening.YES
        except ConnectionRefusedError:
            continue
        except OSError:
            answer = Listening.UNKNOWN
    return answer
