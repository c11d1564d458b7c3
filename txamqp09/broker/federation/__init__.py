"""Federation: exchanges and queues of this broker fed from upstream brokers.

Upstreams are runtime parameters (:mod:`.upstreams`), policies choose what
is federated, and :class:`~.service.FederationService` runs a link
(:mod:`.links`) for each federated exchange or queue and upstream, with
RabbitMQ 3.10's names, headers and status. docs/scaling.rst explains their
use.
"""
