"""A file.stage cut off by a broken connection keeps the bytes that arrived
(0-9's resumable staging), within the staging limit, until --staging-ttl."""

from __future__ import annotations

import struct

from twisted.internet.error import ConnectionLost
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.testing.scripted import ScriptedClient, server_factory
from txamqp09.broker.classes.registry import vhost_classes
from txamqp09.wire import _amqp0_9 as spec
from txamqp09.wire.frames import content_frames
from txamqp09.wire.versions import AMQP0_9

_BODY = bytes(range(256)) * 40  # 10,240 bytes: three body frames at frame_max 4096


def _frames(data: bytes) -> list[bytes]:
    """*data* cut into its frames."""
    frames = []
    while data:
        (size,) = struct.unpack_from(">I", data, 3)
        frames.append(data[: size + 8])
        data = data[size + 8 :]
    return frames


class CutOffStageTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.factory = server_factory(self.clock, staging_ttl=600)

    def open_file(self, peer: ScriptedClient) -> int:
        """file.open of "report" for _BODY; the staged-size the broker reports."""
        peer.send(1, spec.FileOpen(identifier="report", content_size=len(_BODY)))
        return int(peer.expect(1, "file.open-ok").staged_size)

    def cut_off_stage(self, body_frames: int) -> None:
        """Stage _BODY on a new connection that breaks after *body_frames* body frames."""
        peer = ScriptedClient(self.factory, AMQP0_9)
        self.assertEqual(self.open_file(peer), 0)
        stage = _frames(content_frames(1, spec.FileStage(), spec.FileProperties(filename="r"), _BODY, 4096))
        peer.feed(b"".join(stage[: 2 + body_frames]))
        peer.server.connectionLost(Failure(ConnectionLost()))

    def test_broken_connection_keeps_what_arrived(self) -> None:
        self.cut_off_stage(body_frames=2)
        peer = ScriptedClient(self.factory, AMQP0_9)
        staged = self.open_file(peer)
        self.assertEqual(staged, 2 * (4096 - 8))
        peer.send(1, spec.QueueDeclare(queue="files"))
        peer.expect(1, "queue.declare-ok")
        peer.feed(content_frames(1, spec.FileStage(), spec.FileProperties(filename="r"), _BODY[staged:], 4096))
        peer.send(1, spec.FilePublish(exchange="", routing_key="files", identifier="report"))
        self.assertEqual(peer.names(), [])
        queue = self.factory.broker.vhosts["/"].queues["files"]
        self.assertEqual([entry[1].body for entry in queue.messages], [_BODY])

    def test_nothing_kept_before_the_first_body_frame(self) -> None:
        self.cut_off_stage(body_frames=0)
        self.assertEqual(self.open_file(ScriptedClient(self.factory, AMQP0_9)), 0)

    def test_partial_stage_is_bounded_by_the_staging_limit(self) -> None:
        peer = ScriptedClient(self.factory, AMQP0_9)
        staging = vhost_classes(self.factory.broker.vhosts["/"]).staging
        staging.limit = 5000
        self.open_file(peer)
        stage = _frames(content_frames(1, spec.FileStage(), spec.FileProperties(), _BODY, 4096))
        peer.feed(b"".join(stage[:4]))
        peer.server.connectionLost(Failure(ConnectionLost()))
        self.assertEqual(staging.size, 0)
        self.assertEqual(self.open_file(ScriptedClient(self.factory, AMQP0_9)), 0)

    def test_abandoned_stage_expires_after_the_staging_ttl(self) -> None:
        self.cut_off_stage(body_frames=1)
        self.clock.advance(599)
        self.assertEqual(self.open_file(ScriptedClient(self.factory, AMQP0_9)), 4096 - 8)
        self.clock.advance(600)
        self.assertEqual(self.open_file(ScriptedClient(self.factory, AMQP0_9)), 0)

    def test_connection_closed_by_the_client_drops_the_stage(self) -> None:
        peer = ScriptedClient(self.factory, AMQP0_9)
        self.open_file(peer)
        stage = _frames(content_frames(1, spec.FileStage(), spec.FileProperties(), _BODY, 4096))
        peer.feed(b"".join(stage[:3]))
        peer.send(0, spec.ConnectionClose(reply_code=200, reply_text="bye", class_id=0, method_id=0))
        peer.server.connectionLost(Failure(ConnectionLost()))
        self.assertEqual(self.open_file(ScriptedClient(self.factory, AMQP0_9)), 0)
