"""The frame scanner's takers and error routing, and the precompiled frame builders."""

from __future__ import annotations

import struct

from twisted.trial.unittest import SynchronousTestCase

from txamqp09.wire import _amqp0_9_1
from txamqp09.wire.errors import ChannelLevelError, FrameError, PreconditionFailed, UnexpectedFrame
from txamqp09.wire.frames import (
    BASIC_ACK,
    BASIC_NACK,
    BASIC_REJECT,
    FRAME_BODY,
    FRAME_HEADER,
    FRAME_METHOD,
    HEARTBEAT_FRAME,
    ContentAssembler,
    ContentState,
    FrameScanner,
    content_frames,
    encoded_content_frames,
    method_frame,
    tag_frame,
)
from txamqp09.wire.versions import VERSIONS

M = _amqp0_9_1


def raw_frame(frame_type: int, channel: int, payload: bytes) -> bytes:
    """A frame written out by the spec's layout, independently of the builders."""
    return struct.pack(">BHI", frame_type, channel, len(payload)) + payload + b"\xce"


def reference_content(
    channel: int, class_id: int, method: bytes, properties: bytes, body: bytes, frame_max: int
) -> bytes:
    """Method, content header and body frames by the spec's layout."""
    header = struct.pack(">HHQ", class_id, 0, len(body)) + properties
    frames = [raw_frame(FRAME_METHOD, channel, method), raw_frame(FRAME_HEADER, channel, header)]
    chunk = frame_max - 8
    frames += [raw_frame(FRAME_BODY, channel, body[at : at + chunk]) for at in range(0, len(body), chunk)]
    return b"".join(frames)


class BuilderTests(SynchronousTestCase):
    """The builders write the spec's frame layout."""

    def test_encoded_content_frames(self) -> None:
        """Pieces of the method are joined; bodies split at frame_max; an empty body has no body frame."""
        properties = M.BasicProperties(content_type="text/plain", delivery_mode=2).encode()
        pieces = (b"\x00\x3c\x00\x3c", b"\x03tag", b"\x00" * 9)
        for body in (b"", b"a", b"x" * 4088, b"y" * 4089, bytes(range(256)) * 70):
            self.assertEqual(
                encoded_content_frames(9, 60, *pieces, properties, body, 4088),
                reference_content(9, 60, b"".join(pieces), properties, body, 4096),
                len(body),
            )

    def test_buffer_bodies(self) -> None:
        """A memoryview or bytearray body gives the same frames as bytes."""
        body = b"z" * 10000
        expected = encoded_content_frames(1, 60, b"ab", b"", b"", b"\x00\x00", body, 4088)
        for like in (memoryview(body), bytearray(body)):
            self.assertEqual(encoded_content_frames(1, 60, b"ab", b"", b"", b"\x00\x00", like, 4088), expected)

    def test_content_frames_of_a_method(self) -> None:
        """frame_max 0 means one body frame whatever its size."""
        method = M.BasicPublish(exchange="ex", routing_key="rk", mandatory=True)
        properties = M.BasicProperties(headers={"a": 1})
        for frame_max, body in ((4096, b"q" * 9000), (0, b"q" * 9000)):
            self.assertEqual(
                content_frames(3, method, properties, body, frame_max),
                reference_content(3, 60, method.encode(), properties.encode(), body, frame_max or 9008),
            )

    def test_tag_frames(self) -> None:
        """ack, reject and nack frames equal the generic encoders' in every version."""
        for version in VERSIONS.values():
            spec = version.spec
            self.assertEqual(tag_frame(3, BASIC_ACK, 2**40, 1), method_frame(3, spec.BasicAck(2**40, True)))
            self.assertEqual(tag_frame(3, BASIC_REJECT, 9, 0), method_frame(3, spec.BasicReject(9, False)))
        for multiple in (False, True):
            for requeue in (False, True):
                self.assertEqual(
                    tag_frame(1, BASIC_NACK, 5, multiple | requeue << 1),
                    method_frame(1, M.BasicNack(5, multiple, requeue)),
                )


class ScannerTests(SynchronousTestCase):
    """Takers see their channel's frames in place; the rest go to the handler."""

    def setUp(self) -> None:
        self.general: list[tuple[int, int, bytes]] = []
        self.scanner = FrameScanner(lambda *frame: self.general.append(frame), 4096)

    def test_taker_reads_in_place(self) -> None:
        """A taker gets the buffer and the payload's bounds; what it leaves goes on."""
        taken: list[tuple[int, bytes]] = []

        def take(frame_type: int, buf: bytearray, start: int, end: int) -> bool:
            taken.append((frame_type, bytes(buf[start:end])))
            return frame_type == FRAME_BODY

        self.scanner.takers[2] = take
        data = raw_frame(FRAME_METHOD, 2, b"mmmm") + raw_frame(FRAME_BODY, 2, b"bb") + raw_frame(FRAME_BODY, 1, b"cc")
        self.scanner.scan(data[:5])
        self.scanner.scan(data[5:])
        self.assertEqual(taken, [(FRAME_METHOD, b"mmmm"), (FRAME_BODY, b"bb")])
        self.assertEqual(self.general, [(FRAME_METHOD, 2, b"mmmm"), (FRAME_BODY, 1, b"cc")])
        self.assertEqual(self.scanner.buffered, 0)

    def test_taker_added_while_scanning(self) -> None:
        """A taker registered by the handling of one frame sees the frames after it."""
        taken: list[bytes] = []

        def handler(frame_type: int, channel: int, payload: bytes) -> None:
            self.scanner.takers[1] = lambda t, buf, start, end: bool(taken.append(bytes(buf[start:end]))) or True

        scanner = self.scanner = FrameScanner(handler)
        scanner.scan(raw_frame(FRAME_METHOD, 1, b"open") + raw_frame(FRAME_METHOD, 1, b"next"))
        self.assertEqual(taken, [b"next"])

    def test_channel_errors_go_to_their_handler(self) -> None:
        """With a channel-error handler, a soft error names its channel and scanning goes on."""
        errors: list[tuple[int, ChannelLevelError]] = []

        def handler(frame_type: int, channel: int, payload: bytes) -> None:
            if payload == b"bad":
                raise PreconditionFailed("refused")
            self.general.append((frame_type, channel, payload))

        scanner = FrameScanner(handler, channel_error=lambda channel, error: errors.append((channel, error)))
        scanner.scan(raw_frame(FRAME_METHOD, 4, b"bad") + raw_frame(FRAME_METHOD, 5, b"good"))
        self.assertEqual([(channel, error.reply_code) for channel, error in errors], [(4, 406)])
        self.assertEqual(self.general, [(FRAME_METHOD, 5, b"good")])

    def test_channel_errors_end_the_scan_without_a_handler(self) -> None:
        def handler(frame_type: int, channel: int, payload: bytes) -> None:
            raise PreconditionFailed("refused")

        scanner = FrameScanner(handler)
        self.assertRaises(PreconditionFailed, scanner.scan, raw_frame(FRAME_METHOD, 4, b"x") * 2)
        self.assertEqual(scanner.buffered, 9)  # the frame after the failing one

    def test_stop_during_a_scan(self) -> None:
        """Frames after stop() are not handled, and later input is ignored."""
        def handler(frame_type: int, channel: int, payload: bytes) -> None:
            self.general.append((frame_type, channel, payload))
            scanner.stop()

        scanner = FrameScanner(handler)
        scanner.scan(HEARTBEAT_FRAME * 3)
        scanner.scan(HEARTBEAT_FRAME)
        self.assertEqual(len(self.general), 1)
        self.assertEqual(scanner.buffered, 0)

    def test_frame_error_keeps_earlier_frames(self) -> None:
        """Frames before a broken one are handled before the error."""
        data = raw_frame(FRAME_METHOD, 1, b"ok") + raw_frame(FRAME_METHOD, 1, b"broken")[:-1] + b"\x00"
        self.assertRaises(FrameError, self.scanner.scan, data)
        self.assertEqual(self.general, [(FRAME_METHOD, 1, b"ok")])

    def test_pause_and_resume(self) -> None:
        """Frames after pause() wait, with what arrives meanwhile, for resume() and a scan."""
        def handler(frame_type: int, channel: int, payload: bytes) -> None:
            self.general.append((frame_type, channel, payload))
            if payload == b"pause":
                scanner.pause()

        scanner = FrameScanner(handler)
        scanner.scan(raw_frame(FRAME_METHOD, 1, b"pause") + raw_frame(FRAME_METHOD, 1, b"two"))
        scanner.scan(raw_frame(FRAME_METHOD, 1, b"three"))
        self.assertEqual([payload for _, _, payload in self.general], [b"pause"])
        scanner.resume()
        scanner.scan(b"")
        self.assertEqual([payload for _, _, payload in self.general], [b"pause", b"two", b"three"])
        self.assertEqual(scanner.buffered, 0)


class ContentStateTests(SynchronousTestCase):
    """The assembler follows ContentState and refuses frames that do not fit it."""

    def setUp(self) -> None:
        self.assembler = ContentAssembler(M.PROPERTIES, max_body_size=1 << 20)
        self.header = struct.pack(">HHQH", 60, 0, 5, 0)

    def test_transitions(self) -> None:
        assembler = self.assembler
        self.assertIs(assembler.state, ContentState.METHOD)
        self.assertIsNone(assembler.method(M.BasicPublish(routing_key="q")))
        self.assertIs(assembler.state, ContentState.HEADER)
        self.assertIsNone(assembler.header(self.header))
        self.assertIs(assembler.state, ContentState.BODY)
        self.assertIsNone(assembler.body(b"ab"))
        self.assertIs(assembler.state, ContentState.BODY)
        command = assembler.body(b"cde")
        self.assertEqual(command.body, b"abcde")
        self.assertIs(assembler.state, ContentState.METHOD)
        assembler.method(M.BasicPublish(routing_key="q"))
        self.assertIsNotNone(assembler.header(struct.pack(">HHQH", 60, 0, 0, 0)))
        self.assertIs(assembler.state, ContentState.METHOD)

    def refusal(self, call: object, *args: object) -> str:
        with self.assertRaises(UnexpectedFrame) as caught:
            call(*args)  # type: ignore[operator]
        self.assertEqual(caught.exception.reply_code, 505)
        return caught.exception.reply_text

    def test_each_state_names_what_it_expected(self) -> None:
        assembler = self.assembler
        self.assertEqual(
            self.refusal(assembler.body, b"x"), "expected method frame, got non method frame instead"
        )
        assembler.method(M.BasicPublish(routing_key="q"))
        self.assertEqual(
            self.refusal(assembler.body, b"x"),
            "expected content header for class 60, got non content header frame instead",
        )
        assembler.header(self.header)
        self.assertEqual(
            self.refusal(assembler.header, self.header),
            "expected content body, got non content body frame instead",
        )


class RecordingPieceTaker:
    """A :class:`~txamqp09.wire.frames.PieceTaker` that writes down what it gets in *log*."""

    def __init__(self, log: list[tuple[str, object]], accept: bool = True) -> None:
        self.log = log
        self.accept = accept
        self.pieces: list[object] = []

    def startPieces(self, size: int) -> bool:
        if self.accept:
            self.log.append(("start", size))
        return self.accept

    def takePiece(self, piece: bytes | bytearray | memoryview) -> None:
        self.pieces.append(piece)
        self.log.append(("piece", bytes(piece)))

    def endPieces(self) -> None:
        self.log.append(("end", None))


def frames_seen(log: list[tuple[str, object]]) -> list[tuple[int, bytes]]:
    """The frames in *log*, whichever way they came: (type, payload)."""
    frames: list[tuple[int, bytes]] = []
    pieces: list[bytes] = []
    for kind, value in log:
        if kind == "piece":
            pieces.append(value)  # type: ignore[arg-type]
        elif kind == "end":
            frames.append((FRAME_BODY, b"".join(pieces)))
            pieces = []
        elif kind == "frame":
            frames.append(value)  # type: ignore[arg-type]
    return frames


class PieceTakerTests(SynchronousTestCase):
    """Large body frames reach a channel's piece taker as they arrive."""

    def setUp(self) -> None:
        self.log: list[tuple[str, object]] = []
        self.scanner = FrameScanner(lambda t, channel, payload: self.log.append(("frame", (t, payload))), 1 << 20)
        self.taker = RecordingPieceTaker(self.log)
        self.scanner.piece_takers[1] = self.taker
        self.large = bytes(range(256)) * 160  # 40 KiB
        self.frames = [
            (FRAME_METHOD, b"publish"),
            (FRAME_BODY, self.large),
            (FRAME_BODY, self.large[::-1]),
            (FRAME_BODY, b"small"),
            (FRAME_BODY, self.large + b"!"),
            (FRAME_METHOD, b"next"),
        ]
        self.data = b"".join(raw_frame(t, 1, payload) for t, payload in self.frames)

    def feed(self, data: bytes, size: int) -> None:
        for at in range(0, len(data), size):
            self.scanner.scan(data[at : at + size])

    def test_every_block_size(self) -> None:
        """Whatever the blocks the input arrives in, the frames are whole and in order."""
        for size in (1, 7, 8, 9, 1000, 4096, 16383, 16384, 40967, 40968, 40969, 65536, len(self.data)):
            self.log.clear()
            self.feed(self.data, size)
            self.assertEqual(frames_seen(self.log), self.frames, f"blocks of {size} bytes")
            self.assertEqual(self.scanner.buffered, 0)

    def test_every_split(self) -> None:
        """Input cut in two anywhere around the frames' boundaries."""
        boundaries, at = [], 0
        for _, payload in self.frames:
            boundaries.append(at)
            at += len(payload) + 8
        for boundary in boundaries[1:]:
            for cut in range(boundary - 9, boundary + 10):
                self.log.clear()
                self.scanner.scan(self.data[:cut])
                self.scanner.scan(self.data[cut:])
                self.assertEqual(frames_seen(self.log), self.frames, f"cut at {cut}")

    def test_large_frames_come_in_pieces(self) -> None:
        """Large body frames go in pieces, whether they arrive in small
        blocks or whole in one; small frames do not."""
        large = [len(self.large), len(self.large), len(self.large) + 1]
        self.feed(self.data, 4096)
        self.assertEqual([value for kind, value in self.log if kind == "start"], large)
        self.log.clear()
        self.scanner.scan(self.data)
        self.assertEqual([value for kind, value in self.log if kind == "start"], large)
        self.assertEqual([kind for kind, _ in self.log].count("frame"), 3)

    def test_whole_frames_of_a_bytearray_are_taken_whole(self) -> None:
        """Frames all in a bytearray block are scanned in the buffer, as usual."""
        self.scanner.scan(bytearray(self.data))
        self.assertEqual([kind for kind, _ in self.log], ["frame"] * 6)

    def test_small_frames_between_bodies(self) -> None:
        """More small frames than a message's method and header between two
        large body frames send the rest of the block through the buffer."""
        between = [(FRAME_METHOD, b"a"), (FRAME_METHOD, b"b"), (FRAME_METHOD, b"c")]
        frames = [(FRAME_BODY, self.large), *between, (FRAME_BODY, self.large[::-1])]
        data = b"".join(raw_frame(t, 1, payload) for t, payload in frames)
        self.scanner.scan(data[:100])
        self.scanner.scan(data[100:])
        self.assertEqual(frames_seen(self.log), frames)
        self.assertEqual([value for kind, value in self.log if kind == "start"], [len(self.large)])

    def test_pieces_of_received_bytes_are_views(self) -> None:
        """Pieces of received bytes are views of them (no copy) where they are
        at least a quarter of the block; pieces of a bytearray are copies."""
        frame = raw_frame(FRAME_BODY, 1, self.large)
        self.scanner.scan(frame[:100])
        self.scanner.scan(frame[100:30000])
        self.scanner.scan(frame[30000:])
        self.assertEqual([type(piece) for piece in self.taker.pieces], [bytes, memoryview, memoryview])
        self.taker.pieces.clear()
        block = frame[:100]
        self.scanner.scan(block)
        self.scanner.scan(bytearray(frame[100:30000]))
        self.scanner.scan(frame[30000:] + HEARTBEAT_FRAME * 8000)  # the piece is less than a quarter of the block
        self.assertEqual([type(piece) for piece in self.taker.pieces], [bytes, bytes, bytes])

    def test_next_frame_in_the_block_goes_in_pieces(self) -> None:
        """A large frame that starts in the block where the previous one ended
        is passed on from that block too, not through the buffer."""
        first, second = raw_frame(FRAME_BODY, 1, self.large), raw_frame(FRAME_BODY, 1, self.large[::-1])
        self.scanner.scan(first[:100])
        self.scanner.scan(first[100:] + second[:30000])
        self.scanner.scan(second[30000:])
        self.assertEqual([type(piece) for piece in self.taker.pieces], [bytes, memoryview, memoryview, memoryview])
        self.assertEqual(frames_seen(self.log), [(FRAME_BODY, self.large), (FRAME_BODY, self.large[::-1])])
        self.assertEqual(self.scanner.buffered, 0)

    def test_declined_frames_are_taken_whole(self) -> None:
        """A frame the piece taker declines is buffered and handled whole."""
        self.taker.accept = False
        self.feed(self.data, 4096)
        self.assertEqual([kind for kind, _ in self.log], ["frame"] * 6)
        self.assertEqual(frames_seen(self.log), self.frames)

    def test_frame_end_checked(self) -> None:
        """A frame whose size field lies is a frame error; the frame is not ended."""
        broken = raw_frame(FRAME_BODY, 1, self.large)[:-1] + b"\x00" + raw_frame(FRAME_METHOD, 1, b"m")
        with self.assertRaises(FrameError):
            self.feed(broken, 4096)
        self.assertNotIn(("end", None), self.log)

    def test_oversized_frame_after_a_piece(self) -> None:
        """A frame after one passed in pieces, in the same block, is still held to frame_max."""
        scanner = FrameScanner(lambda *frame: None, 65536)
        scanner.piece_takers[1] = self.taker
        first = raw_frame(FRAME_BODY, 1, self.large)
        scanner.scan(first[:1000])
        with self.assertRaises(FrameError):
            scanner.scan(first[1000:] + struct.pack(">BHI", FRAME_BODY, 1, 70000) + b"x" * 30000)

    def test_pause_in_a_frame(self) -> None:
        """What arrives while paused in the middle of a frame waits, and goes on after resume()."""
        self.scanner.scan(self.data[:20000])
        self.scanner.pause()
        self.scanner.scan(self.data[20000:60000])
        self.scanner.resume()
        self.scanner.scan(b"")
        self.scanner.scan(self.data[60000:])
        self.assertEqual(frames_seen(self.log), self.frames)

    def test_pause_from_the_end_of_a_frame(self) -> None:
        """A pause made when a frame ends holds the frames after it in the same block."""
        taker = self.taker

        class Pausing(RecordingPieceTaker):
            def endPieces(self) -> None:
                taker.endPieces()
                scanner.pause()

        scanner = self.scanner
        scanner.piece_takers[1] = Pausing(self.log)
        first = 8 + 7 + len(b"publish") + 100
        scanner.scan(self.data[:first])
        scanner.scan(self.data[first:])
        self.assertEqual(frames_seen(self.log), self.frames[:2])
        scanner.resume()
        scanner.scan(b"")  # the rest is buffered whole: no piece ends to pause at
        self.assertEqual(frames_seen(self.log), self.frames)

    def test_stop_in_a_frame(self) -> None:
        """After stop() in the middle of a frame, nothing more is taken."""
        self.scanner.scan(self.data[:20000])
        self.scanner.stop()
        self.scanner.scan(self.data[20000:])
        self.assertNotIn(("end", None), self.log)
        self.assertEqual(self.scanner.buffered, 0)

    def test_channel_error_at_the_end_of_a_frame(self) -> None:
        """A channel-level error of a frame's end goes to the channel-error handler; scanning goes on."""
        errors: list[tuple[int, ChannelLevelError]] = []

        class Refusing(RecordingPieceTaker):
            def endPieces(self) -> None:
                raise PreconditionFailed("refused")

        scanner = FrameScanner(
            lambda t, channel, payload: self.log.append(("frame", (t, payload))), 1 << 20,
            channel_error=lambda channel, error: errors.append((channel, error)),
        )
        scanner.piece_takers[1] = Refusing(self.log)
        frames = raw_frame(FRAME_BODY, 1, self.large) + raw_frame(FRAME_METHOD, 1, b"after")
        scanner.scan(frames[:1000])
        scanner.scan(frames[1000:])
        self.assertEqual([(channel, error.reply_code) for channel, error in errors], [(1, 406)])
        self.assertEqual(self.log[-1], ("frame", (FRAME_METHOD, b"after")))
