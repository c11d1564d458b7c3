"""A group of brokers sharing one PostgreSQL database, one of them serving at a time.

Brokers started with the same ``--store postgresql://...`` form a group.
One is *active*: it holds the lease kept in the database
(:mod:`~txamqp09.group.lease`), serves AMQP and writes the store; the
others are *standbys*, with no AMQP listener, that take over when the
active dies, hangs or loses the database. :mod:`~txamqp09.group.keeper`
runs the lease in a thread of its own; :mod:`~txamqp09.group.service` turns
what it reports into the broker's role (serve, or stop serving at once);
:mod:`~txamqp09.group.probe` asks a former active's listeners whether it
still serves. docs/high-availability.rst explains the guarantees.

This package needs psycopg 3 (the ``postgresql`` extra).
"""
