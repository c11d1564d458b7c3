"""The metrics listener: ``/metrics``, ``/metrics/per-object`` and ``/metrics/detailed``.

Served without authentication, as RabbitMQ's plugin serves them (bind it to
an interface only the Prometheus server reaches). The answer is Prometheus'
text format, or OpenMetrics when the ``Accept`` header asks for it, gzipped
when ``Accept-Encoding`` allows.

The broker is read at once (:func:`~txamqp09.prometheus.collector.gather`);
the families are then encoded one at a time
(:class:`~txamqp09.prometheus.exposition.Exposition`), and the reactor
serves AMQP traffic between them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import Cooperator
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.resource import EncodingResourceWrapper, Resource
from twisted.web.server import NOT_DONE_YET, GzipEncoderFactory, Request, Site

from txamqp09.management.web import OperatorLoggedSite
from txamqp09.prometheus.collector import TABLE_NAMES, Scope, gather
from txamqp09.prometheus.exposition import Exposition

if TYPE_CHECKING:
    from txamqp09.broker.disk import DiskMonitor
    from txamqp09.management.node import Node

__all__ = ["MetricsResource", "make_metrics_site"]

#: The paths under ``/metrics`` and what they report.
_SCOPES = {b"": Scope.AGGREGATED, b"per-object": Scope.PER_OBJECT, b"detailed": Scope.DETAILED}


class MetricsResource(Resource):
    """``/metrics[/per-object|/detailed]`` of one node.

    :param node: the broker facade the metrics are read from.
    :param reactor: schedules the encoding's steps.
    :param disk: the disk monitor, for free space and its limit.
    """

    isLeaf = True
    log = Logger()

    def __init__(self, node: Node, reactor: IReactorTime, disk: Optional[DiskMonitor] = None) -> None:
        super().__init__()
        self.node = node
        self.disk = disk
        self._cooperator = Cooperator(scheduler=lambda step: reactor.callLater(0, step))
        self._exposition = Exposition()

    def render_GET(self, request: Request) -> Any:
        """Gather the scope the path names, then answer with its exposition
        (a node that is not its group's active broker has only its group's
        metrics to tell: :func:`~txamqp09.prometheus.collector.gather`)."""
        path = request.path.rstrip(b"/").split(b"/")
        scope = _SCOPES.get(b"/".join(path[2:])) if path[:2] == [b"", b"metrics"] else None
        if scope is None:
            request.setResponseCode(404)
            request.setHeader("Content-Type", "text/plain; charset=utf-8")
            return b"Unknown Registry\n" if path[:2] == [b"", b"metrics"] else b"Not Found\n"
        scrape = gather(self.node, scope, disk=self.disk, **self._filters(request))
        answer: list[bytes] = []
        encoding = self._cooperator.cooperate(self._exposition.steps(scrape, request.getHeader("accept") or "", answer))
        finished: list[bool] = []
        request.notifyFinish().addBoth(lambda _: finished.append(True))

        def write(_: object) -> None:
            if finished:
                return
            request.setHeader("Content-Type", answer[0])
            request.write(b"".join(answer[1:]))
            request.finish()

        def failed(failure: Failure) -> None:
            self.log.failure("metrics exposition failed", failure)
            if not finished:
                request.setResponseCode(500)
                request.setHeader("Content-Type", "text/plain; charset=utf-8")
                request.write(f"{type(failure.value).__name__}: {failure.value}\n".encode())
                request.finish()

        encoding.whenDone().addCallbacks(write, failed)
        return NOT_DONE_YET

    def _filters(self, request: Request) -> dict[str, Any]:
        """``/metrics/detailed``'s ``family`` and ``vhost`` parameters (each
        repeatable): unknown families and virtual hosts are left out."""
        args = request.args or {}
        families = frozenset(name.decode("utf-8", "replace") for name in args.get(b"family", ())) & TABLE_NAMES
        vhosts: Optional[set[str]] = None
        if b"vhost" in args:
            known = self.node.database.vhosts
            vhosts = {name for name in (value.decode("utf-8", "replace") for value in args[b"vhost"]) if name in known}
        return {"families": families, "vhosts": vhosts}


def make_metrics_site(node: Node, reactor: IReactorTime, disk: Optional[DiskMonitor] = None) -> Site:
    """The HTTP site serving *node*'s metrics (gzip when the client accepts it)."""
    return OperatorLoggedSite(EncodingResourceWrapper(MetricsResource(node, reactor, disk), [GzipEncoderFactory()]))
