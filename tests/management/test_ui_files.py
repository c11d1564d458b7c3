"""The management listener serves the web UI's files next to the API."""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.web.client import Agent

from tests.management.support import ManagementTestCase
from txamqp09.testing.http import read_body


class UiFilesTests(ManagementTestCase):
    """``/`` is the UI, ``/api/`` the API, on one listener."""

    @inlineCallbacks
    def fetch(self, path: str) -> Any:
        """GET *path* without credentials: (status, headers by lower-case name, body)."""
        response = yield Agent(reactor).request(b"GET", (self.broker.url + path).encode())
        body = yield read_body(response)
        headers = {name.decode().lower(): values[-1].decode() for name, values in response.headers.getAllRawHeaders()}
        return response.code, headers, body

    @inlineCallbacks
    def test_root_is_the_ui_page_kept_to_this_listener(self) -> Any:
        status, headers, body = yield self.fetch("/")
        self.assertEqual(status, 200)
        self.assertIn(b'<script type="module" src="js/app.js">', body)
        self.assertEqual(headers["content-type"], "text/html; charset=utf-8")
        self.assertIn("default-src 'self'", headers["content-security-policy"])

    @inlineCallbacks
    def test_modules_are_javascript(self) -> Any:
        status, headers, body = yield self.fetch("/js/app.js")
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-type"], "text/javascript; charset=utf-8")
        status, headers, _ = yield self.fetch("/vendor/uplot/uPlot.esm.js")
        self.assertEqual((status, headers["content-type"]), (200, "text/javascript; charset=utf-8"))

    @inlineCallbacks
    def test_directories_are_not_listed(self) -> Any:
        status, _, body = yield self.fetch("/js/")
        self.assertEqual(status, 404)
        self.assertNotIn(b"app.js", body)

    @inlineCallbacks
    def test_api_still_answers_under_api(self) -> Any:
        status, headers, body = yield self.fetch("/api/whoami")
        self.assertEqual((status, body), (401, b""))
        self.assertEqual(headers["www-authenticate"], 'Basic realm="RabbitMQ Management"')
