"""Encoding scrapes with ``prometheus_client``, in steps, reusing what did not change.

A scrape of ``/metrics/per-object`` with 10,000 queues has some 100,000
samples, and ``prometheus_client`` spends a few microseconds on each. Most
of them are the same from one scrape to the next (idle queues), so each
table metric's rows are encoded in blocks of :data:`BLOCK_ROWS`, and a
block whose rows (label values and value) are those of the previous scrape
keeps its text. Each block is encoded by ``prometheus_client`` as a family
of its own; the family's ``# HELP`` and ``# TYPE`` lines (what it encodes
for the family without samples) are written once, before its blocks.

:meth:`Exposition.steps` does the work one family at a time, so that the
reactor serves AMQP traffic between them. (A worker thread would not help:
while it holds the interpreter lock, the reactor thread waits for it after
every system call.)
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from prometheus_client.core import Metric as Family
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from txamqp09.prometheus.collector import Scrape, Value, table_family

__all__ = ["BLOCK_ROWS", "Exposition"]

#: Rows encoded (and reused) together.
BLOCK_ROWS = 500
#: How an OpenMetrics exposition ends (each family encoded alone ends so).
_EOF = b"# EOF\n"


class _One(Collector):
    """One family, for the encoder."""

    def __init__(self, family: Family) -> None:
        self.family = family

    def collect(self) -> Iterator[Family]:
        yield self.family


class Exposition:
    """Encodes scrapes, keeping the text of each block of rows for the next."""

    def __init__(self) -> None:
        #: By (content type, family name, per object): each block's rows and text.
        self._blocks: dict[tuple[str, str, bool], list[tuple[list[Value], bytes]]] = {}

    def steps(self, scrape: Scrape, accept: str, answer: list[bytes]) -> Iterator[None]:
        """Encode *scrape* in the format *accept* asks for into *answer* (its
        content type first, then the text in pieces), one family per step."""
        encoder: Callable[[Any], bytes]
        encoder, content_type = choose_encoder(accept)
        openmetrics = content_type.startswith("application/openmetrics-text")

        def encode(family: Family) -> bytes:
            text = encoder(_One(family))
            return text[:-len(_EOF)] if openmetrics else text

        answer.append(content_type.encode("ascii"))
        for table, prefix, per_object, rows in scrape.tables:
            for index, metric in enumerate(table.metrics):
                if metric.per_object and not per_object:
                    continue
                header = encode(table_family(table, prefix, index, ()))
                answer.append(header)
                key = (content_type, prefix + metric.name, per_object)
                kept = self._blocks.get(key, [])
                blocks: list[tuple[list[Value], bytes]] = []
                for start in range(0, len(rows), BLOCK_ROWS):
                    block = [(labels, row[index]) for labels, row in rows[start:start + BLOCK_ROWS]]
                    number = len(blocks)
                    if number < len(kept) and kept[number][0] == block:
                        text = kept[number][1]
                    else:
                        text = encode(table_family(table, prefix, index, block))[len(header):]
                    blocks.append((block, text))
                    answer.append(text)
                self._blocks[key] = blocks
                yield None
        for family in scrape.families:
            answer.append(encode(family))
        if openmetrics:
            answer.append(_EOF)
