"""CPU instructions per stream delivery taken into the Spark data source's
Arrow columns, counted with cachegrind.

No broker, no sockets, no Spark: N deliveries of a stream consumer, as the
broker sends them for ``bench/spark.py``'s stream read (100-byte bodies, a
message-id and delivery-mode 2, the ``x-stream-offset`` header), are
encoded once, then fed to a :class:`~txamqp09.wire.frames.FrameScanner`
in 64 KiB reads with a
:class:`~txamqp09.spark.deliveries.StreamDeliveryTaker` on its channel, as
in a Spark task's reactor thread. The phase picks what runs after the
encoding::

    none     nothing (the baseline)
    take     the scans (the run taker and the frame taker)
    frames   the scans with the frame taker alone (no run taker)
    build    the scans, then the record batch built from the columns

Run each phase under cachegrind (numpy's BLAS threads held to one, as
their idle spinning is counted too)::

    PY=$(python -c "import sys; print(sys.executable)")
    for phase in none take frames build; do
        OPENBLAS_NUM_THREADS=1 PYTHONHASHSEED=0 PYTHONPATH=. valgrind --tool=cachegrind \\
            --cache-sim=no --cachegrind-out-file=/dev/null $PY bench/spark_hotpath.py $phase 2>&1 | grep "I *refs"
    done

A phase's count minus the one before it (``take`` and ``frames`` minus
``none``, ``build`` minus ``take``), divided by N (5,000 unless given as
the second argument), is the cost of one delivery in that step.
"""

from __future__ import annotations

import sys
from typing import Optional

from txamqp09.spark.deliveries import StreamDeliveryTaker
from txamqp09.wire import _amqp0_9_1 as spec
from txamqp09.wire.frames import FrameScanner, content_frames
from txamqp09.wire.versions import AMQP0_9_1

#: Bytes per read of the socket.
READ = 65536
#: The first offset: brokers send offsets as long-long values, which the
#: client's table encoder writes only from 2**31 on.
FIRST = 2**32
TAG = "txamqp09.spark-bench"


class _Connection:
    """What a delivery taker asks of its client connection."""

    version = AMQP0_9_1
    max_body_size = 1 << 27

    def takesDeliveries(self, number: int) -> bool:
        return True


def deliveries(count: int) -> bytes:
    """The frames of *count* stream deliveries on channel 1."""
    frames = []
    for number in range(count):
        method = spec.BasicDeliver(consumer_tag=TAG, delivery_tag=number + 1, redelivered=False,
                                   exchange="", routing_key="bench-stream")
        properties = spec.BasicProperties(delivery_mode=2, message_id=f"0123456789abcdef-0-{number}",
                                          headers={"x-stream-offset": FIRST + number})
        frames.append(content_frames(1, method, properties, b"%d" % number + b"." * 96, 131072))
    return b"".join(frames)


def reader(count: int, runs: bool) -> tuple[FrameScanner, StreamDeliveryTaker, list[Optional[int]]]:
    """A scanner with a taker of offsets 0 to *count* on channel 1 (and its
    run taker if *runs*), and the offsets it reports."""
    arrived: list[Optional[int]] = []
    taker = StreamDeliveryTaker(
        _Connection(), 1, TAG, lambda *frame: False, FIRST, FIRST + count,
        lambda offset, tag, number: arrived.append(offset), lambda error: None,
    )
    scanner = FrameScanner(lambda *frame: None, 131072)
    scanner.takers[1] = taker.take
    if runs:
        scanner.run_taker = taker.take_run
    return scanner, taker, arrived


def main(phase: str, count: int) -> None:
    data = deliveries(count)
    # One delivery through every step first, in every phase: what is done
    # once (imports, Arrow's kernels) is in the baseline.
    scanner, taker, arrived = reader(1, True)
    scanner.scan(deliveries(1))
    list(taker.take_columns().record_batches())
    scanner, taker, arrived = reader(count, phase != "frames")
    if phase == "none":
        return
    for start in range(0, len(data), READ):
        scanner.scan(data[start : start + READ])
    assert arrived and arrived[-1] == FIRST + count - 1, "every delivery was taken"
    if phase == "build":
        for batch in taker.take_columns().record_batches():
            assert batch.num_rows == count


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5000)
