"""Shovels between brokers that are processes of their own, killed with
SIGKILL mid-transfer: nothing is lost (duplicates are counted), and the
shovel comes back from its broker's store."""

from __future__ import annotations

import os
from typing import Any, Optional

from twisted.internet import reactor
from twisted.internet.defer import Deferred, ensureDeferred, succeed
from twisted.logger import Logger
from twisted.trial.unittest import TestCase

from tests.broker.process import BrokerProcess
from tests.management.support import http_request
from txamqp09.client import ClientConnection, connect
from txamqp09.testing.rabbitmq import free_port
from txamqp09.testing.waiting import eventually

log = Logger()

#: Messages the kill -9 test moves.
TOTAL = 20000


class Node:
    """One broker process with a data directory and ports that survive restarts."""

    def __init__(self, test: TestCase, name: str, management: bool = False) -> None:
        self.data_dir = os.path.abspath(test.mktemp())
        os.makedirs(self.data_dir)
        self.name = name
        self.http_port = free_port() if management else None
        self.process: Optional[BrokerProcess] = None
        self.port = 0
        test.addCleanup(self.stop)

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    async def start(self) -> None:
        extra = ("--management", f"tcp:{self.http_port}:interface=127.0.0.1") if self.http_port else ()
        self.process = BrokerProcess(self.data_dir, *extra, port=self.port)
        self.port = await self.process.start(reactor)

    async def kill(self) -> None:
        assert self.process is not None
        await self.process.kill()

    def stop(self) -> Deferred[None]:
        if self.process is None:
            return succeed(None)
        return self.process.stop()

    async def restart_after_kill(self) -> None:
        await self.kill()
        await self.start()


async def _open(url: str) -> ClientConnection:
    return await connect(reactor, url, connection_timeout=5)


async def queue_length(node: Node, queue: str) -> int:
    """Messages ready in *queue* of *node* (-1 while it cannot be reached)."""
    try:
        connection = await _open(node.url)
    except Exception:
        return -1
    try:
        channel = await connection.channel()
        declared = await channel.queue_declare(queue, passive=True)
        return int(declared.message_count)
    except Exception:
        return -1
    finally:
        if connection.transport is not None:
            await connection.disconnect()


async def publish(node: Node, queue: str, total: int) -> None:
    """*total* persistent messages numbered from 0 to durable *queue*, all confirmed."""
    connection = await _open(node.url)
    channel = await connection.channel()
    await channel.queue_declare(queue, durable=True)
    await channel.confirm_select()
    confirms = []
    for number in range(total):
        confirms.append(channel.basic_publish(b"%06d" % number, routing_key=queue, properties={"delivery_mode": 2}))
        if number % 500 == 499:
            await confirms[-1]
    for confirm in confirms:
        await confirm
    await connection.disconnect()


async def drain(node: Node, queue: str) -> list[bytes]:
    """Every message of *queue* (acknowledged), until it is empty."""
    connection = await _open(node.url)
    channel = await connection.channel()
    bodies: list[bytes] = []
    while True:
        message = await channel.basic_get(queue)
        if message is None:
            break
        bodies.append(message.body)
        message.ack()
    await connection.disconnect()
    return bodies


async def put_shovel(node: Node, name: str, value: dict[str, Any]) -> None:
    answer = await http_request(node.api, "PUT", f"/api/parameters/shovel/%2F/{name}", {"value": value})
    assert answer.status == 201, answer


async def shovel_state(node: Node) -> list[str]:
    try:
        answer = await http_request(node.api, "GET", "/api/shovels")
    except Exception:
        return []
    return [row["state"] for row in answer.body or []]


class KillTests(TestCase):
    """Source, destination and the shovel's own broker, each killed in turn."""

    timeout = 300

    def test_kill_9_each_broker_in_turn(self) -> Deferred[None]:
        return ensureDeferred(self._kill_each())

    async def _kill_each(self) -> None:
        source, destination = Node(self, "source"), Node(self, "destination")
        host = Node(self, "shovel", management=True)
        for node in (source, destination, host):
            await node.start()
        await publish(source, "work", TOTAL)
        await put_shovel(host, "mover", {
            "src-uri": source.url, "src-queue": "work", "src-prefetch-count": 200,
            "dest-uri": [destination.url], "dest-queue": "done", "reconnect-delay": 0.2,
        })
        await eventually(lambda: ensureDeferred(shovel_state(host)).addCallback(lambda s: s == ["running"]),
                         reactor, 30, 0.05, "the shovel running")
        moved_at_kill = []
        for victim, fraction in ((source, 0.1), (destination, 0.35), (host, 0.6)):
            await eventually(
                lambda: ensureDeferred(queue_length(destination, "done")).addCallback(
                    lambda count, fraction=fraction: count >= TOTAL * fraction),
                reactor, 120, 0.02, f"{fraction:.0%} moved before killing the {victim.name}",
            )
            moved_at_kill.append(await queue_length(destination, "done"))
            await victim.restart_after_kill()
        await eventually(lambda: ensureDeferred(queue_length(source, "work")).addCallback(lambda n: n == 0),
                         reactor, 120, 0.1, "the source queue emptied")
        await eventually(lambda: ensureDeferred(shovel_state(host)).addCallback(lambda s: s == ["running"]),
                         reactor, 30, 0.05, "the shovel running again after its broker's kill -9")
        bodies = await drain(destination, "done")
        unique = set(bodies)
        duplicates = len(bodies) - len(unique)
        log.info("shovel kill -9 test: {total} moved, {duplicates} duplicates, {moved} at the kills",
                 total=TOTAL, duplicates=duplicates, moved=moved_at_kill)
        self.assertEqual(unique, {b"%06d" % number for number in range(TOTAL)})
        self.assertLess(duplicates, TOTAL)
        self.assertTrue(all(count < TOTAL for count in moved_at_kill), moved_at_kill)


class RestartTests(TestCase):
    """A clean restart of the shovel's broker brings its shovel back from the store."""

    timeout = 120

    def test_shovel_restored_after_restart(self) -> Deferred[None]:
        return ensureDeferred(self._restart())

    async def _restart(self) -> None:
        source, host = Node(self, "source"), Node(self, "shovel", management=True)
        await source.start()
        await host.start()
        await put_shovel(host, "back", {"src-uri": source.url, "src-queue": "in", "dest-uri": "amqp://",
                                        "dest-queue": "local", "reconnect-delay": 0.2})
        await eventually(lambda: ensureDeferred(shovel_state(host)).addCallback(lambda s: s == ["running"]),
                         reactor, 30, 0.05, "the shovel running")
        assert host.process is not None
        await host.process.stop()
        await host.start()
        await eventually(lambda: ensureDeferred(shovel_state(host)).addCallback(lambda s: s == ["running"]),
                         reactor, 30, 0.05, "the shovel running after the restart")
        await publish(source, "in", 10)
        await eventually(lambda: ensureDeferred(queue_length(host, "local")).addCallback(lambda n: n == 10),
                         reactor, 30, 0.05, "ten messages moved into the shovel's own broker")
