"""Methods of these classes sent in the wrong state get the spec's error, frame by frame."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from txamqp09.testing.scripted import ScriptedClient, server_factory
from txamqp09.wire.frames import content_frames
from txamqp09.wire.versions import AMQP0_8, AMQP0_9


class OutOfStateTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.factory = server_factory()

    def assertConnectionClosed(self, peer: ScriptedClient, code: int, text: str) -> None:
        close = peer.expect(0, "connection.close")
        self.assertEqual(close.reply_code, code)
        self.assertIn(text, close.reply_text)

    def test_answers_to_nothing(self) -> None:
        """An answer to a request the server never sent is 503."""
        for name, text in [
            ("FileOpenOk", "sent no file.open"),
            ("MessageOk", "no message.transfer awaits"),
            ("MessageReject", "no message.transfer awaits"),
            ("MessageEmpty", "never sends"),
            ("MessageOffset", "never sends"),
            ("ChannelOk", "sent no channel.pong"),
        ]:
            peer = ScriptedClient(self.factory, AMQP0_9)
            peer.send(1, getattr(peer.spec, name)())
            self.assertConnectionClosed(peer, 503, text)

    def test_stage_without_open(self) -> None:
        peer = ScriptedClient(self.factory, AMQP0_8)
        peer.feed(content_frames(1, peer.spec.FileStage(), peer.spec.FileProperties(), b"data", 4096))
        self.assertConnectionClosed(peer, 503, "file.stage without a file.open")

    def test_content_larger_than_the_broker_takes_is_refused_at_open(self) -> None:
        peer = ScriptedClient(server_factory(max_body_size=1000), AMQP0_9)
        peer.send(1, peer.spec.FileOpen(identifier="big", content_size=1001))
        close = peer.expect(1, "channel.close")
        self.assertEqual((close.reply_code, close.class_id, close.method_id), (406, 70, 40))

    def test_stream_content_is_assembled_on_the_general_path(self) -> None:
        """The publish fast path leaves other classes' content to the assembler:
        a stream.publish split over several body frames arrives whole."""
        peer = ScriptedClient(self.factory, AMQP0_9)
        peer.send(1, peer.spec.QueueDeclare(queue="q"))
        peer.expect(1, "queue.declare-ok")
        body = bytes(range(256)) * 40
        peer.feed(content_frames(1, peer.spec.StreamPublish(routing_key="q"), peer.spec.StreamProperties(), body, 4096))
        peer.send(1, peer.spec.BasicGet(queue="q", no_ack=True))
        frames = peer.frames()
        self.assertEqual(frames[0][2].NAME, "basic.get-ok")
        self.assertEqual(b"".join(payload for kind, _, payload in frames if kind == 3), body)

    def test_second_reference_open_is_406(self) -> None:
        peer = ScriptedClient(self.factory, AMQP0_9)
        peer.send(1, peer.spec.MessageOpen(reference=b"r"))
        peer.expect(1, "message.ok")
        peer.send(1, peer.spec.MessageOpen(reference=b"r"))
        close = peer.expect(1, "channel.close")
        self.assertEqual(close.reply_code, 406)
        self.assertIn("already open", close.reply_text)
