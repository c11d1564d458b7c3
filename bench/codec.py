#!/usr/bin/env python
"""Wire codec throughput: txamqp09 next to pamqp, in messages per second.

Run from a checkout::

    python bench/codec.py            # default: 50,000 messages, best of 5
    python bench/codec.py -n 200000 -r 7

Four workloads, each a complete message as frames (method, content header
with basic properties, one 16-byte body frame):

* encode basic.publish: build the method and properties objects and produce
  the three frames' bytes.
* decode basic.publish: parse the three frames from the bytes of one message,
  decode the method, assemble the content and decode the properties.
* encode / decode basic.deliver: the same for a delivery.

pamqp does the equivalent with ``pamqp.frame.marshal`` / ``unmarshal`` of
``Basic.Publish`` / ``Basic.Deliver``, ``ContentHeader`` with
``Basic.Properties`` and ``ContentBody``. Both decoders get one message's
bytes at a time and both fully decode the properties. The same property
values are used on both sides and the outputs are checked to be the same
bytes before timing.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from typing import Any, Callable, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from txamqp09.wire import _amqp0_9_1 as M  # noqa: E402
from txamqp09.wire.base import decode_method  # noqa: E402
from txamqp09.wire.frames import (  # noqa: E402
    FRAME_BODY,
    FRAME_HEADER,
    FRAME_METHOD,
    ContentAssembler,
    FrameReader,
    content_frames,
)

try:
    from pamqp import commands as pamqp_commands
    from pamqp import frame as pamqp_frame
    from pamqp.body import ContentBody
    from pamqp.header import ContentHeader
except ImportError:  # pragma: no cover
    pamqp_frame = None  # type: ignore[assignment]

BODY = b"0123456789abcdef"
FRAME_MAX = 131072
CHANNEL = 1
PROPS: dict[str, Any] = {
    "content_type": "application/octet-stream",
    "delivery_mode": 2,
    "message_id": "msg-000001",
}

# -- txamqp09 -----------------------------------------------------------------


def ours_encode_publish() -> bytes:
    """basic.publish + header + body, objects built per message."""
    return content_frames(
        CHANNEL,
        M.BasicPublish(exchange="amq.direct", routing_key="bench"),
        M.BasicProperties(**PROPS),
        BODY,
        FRAME_MAX,
    )


def ours_encode_deliver() -> bytes:
    """basic.deliver + header + body, objects built per message."""
    return content_frames(
        CHANNEL,
        M.BasicDeliver(
            consumer_tag="ctag-1", delivery_tag=1, exchange="amq.direct", routing_key="bench"
        ),
        M.BasicProperties(**PROPS),
        BODY,
        FRAME_MAX,
    )


def ours_decoder() -> Callable[[bytes], Any]:
    """A decoder of one message's bytes: reader, method, assembler, properties."""
    feed = FrameReader(FRAME_MAX).feed
    assembler = ContentAssembler(M.PROPERTIES, FRAME_MAX)
    method, header, body = assembler.method, assembler.header, assembler.body
    methods = M.METHODS

    def decode(data: bytes) -> Any:
        command = None
        for kind, _channel, payload in feed(data):
            if kind == FRAME_METHOD:
                command = method(decode_method(methods, payload))
            elif kind == FRAME_HEADER:
                command = header(payload)
            elif kind == FRAME_BODY:
                command = body(payload)
        assert command is not None
        return command.method, command.properties, command.body

    return decode


# -- pamqp --------------------------------------------------------------------


def pamqp_encode_publish() -> bytes:
    """The same frames with pamqp."""
    marshal = pamqp_frame.marshal
    return (
        marshal(pamqp_commands.Basic.Publish(exchange="amq.direct", routing_key="bench"), CHANNEL)
        + marshal(
            ContentHeader(0, len(BODY), pamqp_commands.Basic.Properties(**PROPS)), CHANNEL
        )
        + marshal(ContentBody(BODY), CHANNEL)
    )


def pamqp_encode_deliver() -> bytes:
    marshal = pamqp_frame.marshal
    return (
        marshal(
            pamqp_commands.Basic.Deliver(
                consumer_tag="ctag-1", delivery_tag=1, exchange="amq.direct", routing_key="bench"
            ),
            CHANNEL,
        )
        + marshal(
            ContentHeader(0, len(BODY), pamqp_commands.Basic.Properties(**PROPS)), CHANNEL
        )
        + marshal(ContentBody(BODY), CHANNEL)
    )


def pamqp_decode(data: bytes) -> Any:
    """Unmarshal the three frames of one message (properties included)."""
    unmarshal: Callable[[bytes], tuple[int, int, Any]] = pamqp_frame.unmarshal
    consumed, _, method = unmarshal(data)
    pos = consumed
    consumed, _, header = unmarshal(data[pos:])
    pos += consumed
    _, _, body = unmarshal(data[pos:])
    return method, header.properties, body.value


# -- timing -------------------------------------------------------------------


def _seconds(call: Callable[..., Any], arg: Optional[bytes], n: int) -> float:
    """CPU seconds of this process for *n* calls (other processes' load and
    time spent descheduled do not count)."""
    rng = range(n)
    gc.collect()
    gc.disable()  # as timeit does: collections would land on either side at random
    try:
        start = time.process_time()
        if arg is None:
            for _ in rng:
                call()
        else:
            for _ in rng:
                call(arg)
        return time.process_time() - start
    finally:
        gc.enable()


def rates(
    ours: Callable[..., Any], theirs: Callable[..., Any], arg: Optional[bytes], n: int,
    repeat: int,
) -> tuple[float, float]:
    """Best messages/second of each over *repeat* alternating runs of *n* calls.

    Alternating the two keeps a burst of load from another process from
    favouring one side.
    """
    best_ours = best_theirs = float("inf")
    for _ in range(repeat):
        best_ours = min(best_ours, _seconds(ours, arg, n))
        best_theirs = min(best_theirs, _seconds(theirs, arg, n))
    return n / best_ours, n / best_theirs


def check() -> None:
    """Both sides produce and read the same bytes before anything is timed."""
    for ours, theirs in ((ours_encode_publish, pamqp_encode_publish),
                         (ours_encode_deliver, pamqp_encode_deliver)):
        data = ours()
        assert data == theirs(), f"{ours.__name__}: bytes differ from pamqp"
        method, props, body = ours_decoder()(data)
        p_method, p_props, p_body = pamqp_decode(data)
        assert body == p_body == BODY
        assert props == M.BasicProperties(**PROPS)
        assert p_props.message_id == props.message_id
        assert method.routing_key == p_method.routing_key == "bench"


def main(argv: Optional[list[str]] = None) -> int:
    """Print a table of messages/second for both codecs and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=50_000, help="messages per run")
    parser.add_argument("-r", "--repeat", type=int, default=5, help="runs; the best counts")
    args = parser.parse_args(argv)
    if pamqp_frame is None:
        print("pamqp is not installed: pip install pamqp", file=sys.stderr)
        return 1
    check()
    publish = ours_encode_publish()
    deliver = ours_encode_deliver()
    decode = ours_decoder()
    rows = [
        ("encode basic.publish",
         *rates(ours_encode_publish, pamqp_encode_publish, None, args.n, args.repeat)),
        ("decode basic.publish", *rates(decode, pamqp_decode, publish, args.n, args.repeat)),
        ("encode basic.deliver",
         *rates(ours_encode_deliver, pamqp_encode_deliver, None, args.n, args.repeat)),
        ("decode basic.deliver", *rates(decode, pamqp_decode, deliver, args.n, args.repeat)),
    ]
    import pamqp

    print(f"Python {platform.python_version()} ({platform.python_implementation()}), "
          f"pamqp {pamqp.__version__}; {args.n} messages x best of {args.repeat}; "
          f"method + header + {len(BODY)}-byte body")
    print()
    print(f"{'workload':<22} {'txamqp09 msg/s':>15} {'pamqp msg/s':>12} {'ratio':>6}"
          f" {'txamqp09 us/msg':>16}")
    print(f"{'-' * 22} {'-' * 15} {'-' * 12} {'-' * 6} {'-' * 16}")
    for name, ours, theirs in rows:
        print(f"{name:<22} {ours:>15,.0f} {theirs:>12,.0f} {ours / theirs:>5.1f}x"
              f" {1e6 / ours:>16.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
