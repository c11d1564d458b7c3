"""Prometheus metrics, by the names of RabbitMQ's ``rabbitmq_prometheus`` plugin.

=============================  ================================================
module                         what it holds
=============================  ================================================
:mod:`.families`               the metrics, their tables, where values come from
:mod:`.collector`              one scrape: read the broker, build the families
:mod:`.web`                    the HTTP listener and its three paths
=============================  ================================================

``twistd amqp09 --prometheus tcp:15692:interface=127.0.0.1`` serves
``/metrics``, ``/metrics/per-object`` and ``/metrics/detailed``;
docs/management.rst describes them.
"""

from txamqp09.prometheus.web import MetricsResource, make_metrics_site

__all__ = ["MetricsResource", "make_metrics_site"]
