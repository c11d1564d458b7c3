"""The client's precompiled frames equal what the generic encoders make, in every version."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from txamqp09.client import framing
from txamqp09.client.confirms import ConfirmTracker
from txamqp09.client.errors import MessageNacked
from txamqp09.wire.frames import content_frames, method_frame
from txamqp09.wire.versions import VERSIONS


class FramingTests(SynchronousTestCase):
    def test_publish(self) -> None:
        for version in VERSIONS.values():
            spec = version.spec
            method = spec.BasicPublish(exchange="ex", routing_key="rk", mandatory=True, immediate=True)
            fast = framing.publish_method_frame(7, "ex", "rk", True, True)
            self.assertEqual(fast, method_frame(7, method), version)
            properties = spec.BasicProperties(content_type="text/plain")
            for body in (b"", b"x" * 4088, b"y" * 4089, bytes(range(256)) * 70):
                self.assertEqual(
                    framing.content_frames(fast, 7, properties.encode(), body, 4096),
                    content_frames(7, method, properties, body, 4096),
                    (version, len(body)),
                )

    def test_acknowledgements(self) -> None:
        for version in VERSIONS.values():
            spec = version.spec
            self.assertEqual(framing.ack_frame(3, 2**40, True), method_frame(3, spec.BasicAck(2**40, True)))
            self.assertEqual(framing.reject_frame(3, 9, False), method_frame(3, spec.BasicReject(9, False)))
        nack = VERSIONS["0-9-1"].spec.BasicNack
        for multiple in (False, True):
            for requeue in (False, True):
                self.assertEqual(framing.nack_frame(1, 5, multiple, requeue), method_frame(1, nack(5, multiple, requeue)))


class ConfirmTrackerTests(SynchronousTestCase):
    def test_out_of_order_single_acks(self) -> None:
        tracker = ConfirmTracker()
        first, second, third = (tracker.published() for _ in range(3))
        tracker.acked(2, False)
        tracker.nacked(1, False)
        self.assertEqual(self.successResultOf(second), 2)
        self.failureResultOf(first, MessageNacked)
        tracker.acked(3, True)
        self.assertEqual((self.successResultOf(third), tracker.unconfirmed), (3, 0))

    def test_unknown_tags_are_ignored(self) -> None:
        tracker = ConfirmTracker()
        waiting = tracker.published()
        tracker.acked(5, False)
        self.assertNoResult(waiting)

    def test_callbacks_publishing_more_are_not_settled_by_the_same_ack(self) -> None:
        tracker = ConfirmTracker()
        later = []
        tracker.published().addCallback(lambda _: later.append(tracker.published()))
        tracker.acked(0, True)
        self.assertNoResult(later[0])
