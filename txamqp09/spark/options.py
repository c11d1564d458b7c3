"""The data source's options, parsed once and checked with clear errors.

======================== ==========================================================
``url``                  the broker, as an ``amqp://`` or ``amqps://`` URL (required)
``queue``                the queue to read (required for reading)
``queueType``            ``classic`` (default) or ``stream``, as the queue's
                         ``x-queue-type``
``startingOffset``       stream queues: ``first``, ``next`` (the tail when the
                         read is planned, or the query starts) or an offset;
                         ``first`` for batch reads and ``next`` for streaming
                         reads by default
``endingOffset``         stream queues, batch reads: ``last`` (the tail when the
                         read is planned; default) or an offset (exclusive)
``numPartitions``        Spark partitions per read or micro-batch (default 2)
``maxMessagesPerTrigger`` streaming reads: messages per micro-batch at most
``prefetch``             basic.qos prefetch count of each consumer (default 1000)
``exchange``             writes: the exchange of rows without an ``exchange``
                         column (default: the default exchange ``""``)
``routingKey``           writes: the routing key of rows without a
                         ``routing_key`` column (default ``""``)
``deliveryMode``         writes: 2 (persistent, default) or 1 (transient), for
                         rows whose ``properties`` do not set it
``writeId``              batch writes: the first part of each message id
                         (default: a new random id per write)
======================== ==========================================================
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Mapping, Optional, Union

__all__ = ["ReadOptions", "WriteOptions", "OptionError"]

#: Where a stream read starts or ends: "first", "next", "last" or an offset.
Position = Union[str, int]

_QUEUE_TYPES = ("classic", "stream")


class OptionError(ValueError):
    """An option is missing or has a value the data source cannot use.

    Spark reports an error of a Python data source as a line of its own
    (``[PYTHON_DATA_SOURCE_ERROR] Failed to initialize Python data source
    reader:``) followed by the worker's formatted exception: a traceback
    with the message on its last line. Python formats an exception's cause
    before the exception, and an exception that was never raised without a
    traceback; so an OptionError's cause is its own message, which then ends
    Spark's first line. The cause stays when it is cleared (Spark clears
    causes when it shortens tracebacks).
    """

    def __init__(self, message: str, *, headline: bool = False) -> None:
        super().__init__(message)
        self._headline = None if headline else OptionError(message, headline=True)

    @property  # type: ignore[override]
    def __cause__(self) -> Optional[BaseException]:
        """The message, as an exception without a traceback (None for that one)."""
        return self._headline

    @__cause__.setter
    def __cause__(self, cause: Optional[BaseException]) -> None:
        """Ignored: the message stays first."""


def _required(options: Mapping[str, str], name: str) -> str:
    value = options.get(name)
    if not value:
        raise OptionError(f"the amqp09 data source needs the option {name!r}")
    return value


def _integer(options: Mapping[str, str], name: str, default: Optional[int], minimum: int) -> Optional[int]:
    text = options.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"option {name!r} must be an integer, not {text!r}") from None
    if value < minimum:
        raise OptionError(f"option {name!r} must be at least {minimum}, not {value}")
    return value


def _position(options: Mapping[str, str], name: str, default: str, words: tuple[str, ...]) -> Position:
    text = options.get(name, default)
    if text in words:
        return text
    try:
        offset = int(text)
    except ValueError:
        raise OptionError(f"option {name!r} must be {', '.join(words)} or an offset, not {text!r}") from None
    if offset < 0:
        raise OptionError(f"option {name!r} must not be negative, not {offset}")
    return offset


@dataclass(frozen=True)
class ReadOptions:
    """How to read: the broker, the queue, and how to split the work."""

    url: str
    queue: str
    stream: bool
    starting: Position
    ending: Position
    partitions: int
    prefetch: int
    max_per_trigger: Optional[int]

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool) -> ReadOptions:
        """Check *options*; *streaming* picks the default starting offset.

        :raises OptionError: a missing or unusable option.
        """
        queue_type = options.get("queueType", "classic")
        if queue_type not in _QUEUE_TYPES:
            raise OptionError(f"option 'queueType' must be classic or stream, not {queue_type!r}")
        prefetch = _integer(options, "prefetch", 1000, 1)
        partitions = _integer(options, "numPartitions", 2, 1)
        assert prefetch is not None and partitions is not None
        return cls(
            url=_required(options, "url"),
            queue=_required(options, "queue"),
            stream=queue_type == "stream",
            starting=_position(options, "startingOffset", "next" if streaming else "first", ("first", "next")),
            ending=_position(options, "endingOffset", "last", ("last",)),
            partitions=partitions,
            prefetch=prefetch,
            max_per_trigger=_integer(options, "maxMessagesPerTrigger", None, 1),
        )


@dataclass(frozen=True)
class WriteOptions:
    """How to publish: the broker and the defaults of rows' routing."""

    url: str
    exchange: str
    routing_key: str
    delivery_mode: int
    write_id: str

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        """Check *options*.

        :raises OptionError: a missing or unusable option.
        """
        delivery_mode = _integer(options, "deliveryMode", 2, 1)
        if delivery_mode not in (1, 2):
            raise OptionError(f"option 'deliveryMode' must be 1 or 2, not {delivery_mode}")
        assert delivery_mode is not None
        return cls(
            url=_required(options, "url"),
            exchange=options.get("exchange", ""),
            routing_key=options.get("routingKey", ""),
            delivery_mode=delivery_mode,
            write_id=options.get("writeId") or uuid.uuid4().hex,
        )
