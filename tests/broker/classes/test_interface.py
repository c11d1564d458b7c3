"""The 0-8/0-9 classes reach the server through ServerChannel's public interface."""

from __future__ import annotations

import ast
from pathlib import Path

from twisted.trial.unittest import SynchronousTestCase

import txamqp09.broker.classes
from txamqp09.broker.channel import ServerChannel
from txamqp09.testing.scripted import ScriptedClient, server_factory

_PACKAGE = Path(txamqp09.broker.classes.__file__).parent


class ChannelInterfaceTests(SynchronousTestCase):
    def test_classes_use_no_connection_and_no_private_channel_names(self) -> None:
        """No module of broker/classes reads ``.connection`` or a private
        ServerChannel attribute (``channel._...``)."""
        private = {name for name in vars(ServerChannel) if name.startswith("_") and not name.startswith("__")}
        found = []
        for path in sorted(_PACKAGE.glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and (node.attr == "connection" or node.attr in private):
                    found.append(f"{path.name}:{node.lineno} .{node.attr}")
        self.assertEqual(found, [])

    def test_the_interface_reads_the_connection(self) -> None:
        channel = ScriptedClient(server_factory()).server.channels[1]
        connection = channel.connection
        self.assertEqual(
            (channel.frame_max, channel.max_body_size, channel.clock, channel.batch, channel.user_name),
            (connection.frame_max, connection.max_body_size, connection.clock, connection.batch, "guest"),
        )
