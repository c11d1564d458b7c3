"""The management API over HTTP: authentication, dispatch and JSON answers.

:func:`make_site` builds the ``twisted.web`` site that ``twistd amqp09
--management ENDPOINT`` serves: the web UI's static files
(:mod:`txamqp09.management.ui`) at ``/`` and the API under ``/api/``.
Every request under ``/api/`` is routed
(404/405 when nothing fits), authenticated with HTTP basic auth through the
broker's own cred portal (the users AMQP clients log in as), checked
against the route's tag, and handed to the handler (on a member of a
group that does not serve, a standby, only if the route serves there:
others answer 503 naming the role, see :mod:`txamqp09.management.group`);
what the handler returns or raises becomes a JSON answer. Errors the model raises (AMQP
reply codes) become RabbitMQ's HTTP errors; anything else is logged and
answered with a 500 body naming the error.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Optional

from twisted.cred.error import UnauthorizedLogin, UnhandledCredentials
from twisted.internet.defer import Deferred, maybeDeferred, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web import http
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request, Site

from txamqp09 import __version__
from txamqp09.broker import oplog
from txamqp09.broker.auth.cred import IAMQPUser, LoopbackOnly
from txamqp09.broker.auth.sasl import PasswordCredentials, PeerInfo
from txamqp09.management.answers import ApiError, Encoded, Reply, encode, not_authorised
from txamqp09.management.api import ApiRequest, Router, split_path
from txamqp09.management.endpoints import MODULES
from txamqp09.management.endpoints.nodes import entries, entry
from txamqp09.management.endpoints.overview import group_status, listeners
from txamqp09.management.group import active_member
from txamqp09.management.node import Node
from txamqp09.management.ui import UiFiles
from txamqp09.wire.errors import AMQPError

__all__ = ["ManagementResource", "OperatorLoggedSite", "make_router", "make_site"]

#: How a refused login to the API or the web UI is named in the operator log.
HTTP_LOGIN = "HTTP basic auth (management API)"

#: The challenge RabbitMQ sends with a 401 for missing or wrong credentials.
_CHALLENGE = {"WWW-Authenticate": 'Basic realm="RabbitMQ Management"'}
#: RabbitMQ's answer to a request without credentials: the challenge, no body.
_UNAUTHENTICATED = Reply(401, None, _CHALLENGE)
#: RabbitMQ's answer to Basic credentials it cannot decode.
_MALFORMED = Reply(400)


def make_router() -> Router:
    """A router with every endpoint module's routes."""
    router = Router()
    for module in MODULES:
        module.register(router)
    return router


def _refused_before_login(request: Request) -> Optional[Reply]:
    """RabbitMQ's answer when *request* does not try to log in: no
    ``Authorization`` header, or one of a scheme other than Basic or Bearer
    (401, the challenge, no body); a Basic one that is not base64 of
    ``user:password`` (400, no body). None when it tries."""
    header = request.getHeader(b"authorization")
    scheme, _, value = (header or b"").strip().partition(b" ")
    if scheme.lower() == b"bearer":
        return None
    if scheme.lower() != b"basic":
        return _UNAUTHENTICATED
    try:
        decoded = base64.b64decode(value.strip(), validate=True)
    except binascii.Error:
        return _MALFORMED
    return None if b":" in decoded else _MALFORMED


def _from_amqp(error: AMQPError) -> ApiError:
    """The HTTP answer for an AMQP error the model raised."""
    code = getattr(error, "reply_code", 0)
    text = getattr(error, "reply_text", str(error))
    if code == 404:
        return ApiError(404, "not_found", text)
    if code in (403, 530):
        return not_authorised(text)
    return ApiError(400, "bad_request", text)


class ManagementResource(Resource):
    """Serves the API of one :class:`Node`.

    :param router: the routes (all endpoint modules' by default).
    """

    isLeaf = True
    log = Logger()

    def __init__(self, node: Node, router: Router | None = None) -> None:
        super().__init__()
        self.node = node
        self.router = router if router is not None else make_router()

    def render(self, request: Request) -> Any:
        """Answer *request* once its handler is done."""
        finished: list[bool] = []
        request.notifyFinish().addBoth(lambda _: finished.append(True))
        answer = maybeDeferred(self._handle, request)
        answer.addErrback(self._failed)
        answer.addCallback(self._write, request, finished)
        return NOT_DONE_YET

    def _handle(self, request: Request) -> Deferred[Any]:
        method = request.method.decode("ascii", "replace")
        path = request.path.decode("utf-8", "replace")
        not_serving = _not_serving(self.node, split_path(path))
        if not_serving is not None:
            return succeed(not_serving)
        handler, tag, args = self.router.resolve(method, split_path(path))
        before_login = _refused_before_login(request)
        if before_login is not None:
            return succeed(before_login)
        name = request.getUser().decode("utf-8", "replace")
        password = request.getPassword().decode("utf-8", "replace")
        peer = PeerInfo(request.getClientAddress())
        credentials = PasswordCredentials(name, password, "PLAIN", peer)
        login = self.node.security.portal.login(credentials, None, IAMQPUser)

        def refused(failure: Failure) -> None:
            failure.trap(UnauthorizedLogin, UnhandledCredentials)
            oplog.login_refused(name, peer.host, HTTP_LOGIN, str(failure.value))
            if failure.check(LoopbackOnly):
                raise not_authorised("User can only log in via localhost")
            raise ApiError(401, "not_authorized", "Login failed", _CHALLENGE)

        def logged_in(result: tuple[Any, IAMQPUser, Any]) -> Deferred[Any]:
            _, user, logout = result
            try:
                self.router.authorise(user.tags, tag)
                api_request = ApiRequest(
                    user,
                    method,
                    args,
                    {key.decode("utf-8", "replace"): values[-1].decode("utf-8", "replace")
                     for key, values in (request.args or {}).items() if values},
                    {key.decode("latin-1").lower(): values[-1].decode("latin-1")
                     for key, values in request.requestHeaders.getAllRawHeaders()},
                    request.content.read() if request.content is not None else b"",
                    self.node,
                )
                return maybeDeferred(handler, api_request)
            finally:
                logout()

        return login.addCallbacks(logged_in, refused)

    def _failed(self, failure: Failure) -> Reply:
        """The answer for a refusal or a fault."""
        error = failure.value
        if isinstance(error, ApiError):
            return Reply(error.status, error.body(), error.headers)
        if isinstance(error, AMQPError):
            api_error = _from_amqp(error)
            return Reply(api_error.status, api_error.body())
        self.log.failure("management API request failed", failure)
        return Reply(500, {"error": "internal_error", "reason": f"{type(error).__name__}: {error}"})

    def _write(self, result: Any, request: Request, finished: list[bool]) -> None:
        if request.method not in (b"GET", b"HEAD"):
            self.node.changed()
        if finished:
            return
        reply = result if isinstance(result, Reply) else Reply(200 if result is not None else 204, result)
        request.setResponseCode(reply.status)
        for name, value in reply.headers.items():
            request.setHeader(name, value)
        request.setHeader("Cache-Control", "no-cache")
        if reply.body is not None:
            request.setHeader("Content-Type", "application/json")
            request.write(reply.body.data if isinstance(reply.body, Encoded) else encode(reply.body))
        request.finish()


def _not_serving(node: Node, segments: list[str]) -> Optional[Reply]:
    """The answer of a node that is not its group's active broker (a
    standby, or one that was fenced), without login: the overview says its
    role and the group, ``/api/nodes`` lists the members; health checks
    fail (503 ``status: failed``); every other endpoint answers 503 with the
    reason. None while it serves."""
    group = node.group
    if group is None or group.serving:
        return None
    status = group.status()
    reason = f"this broker is a {status.role.value} member of its group and serves no AMQP; {active_member(status)}"
    if segments[:2] == ["api", "nodes"] and len(segments) <= 3:
        try:
            return Reply(200, entry(node, segments[2]) if len(segments) == 3 else entries(node))
        except ApiError as error:
            return Reply(error.status, error.body())
    if segments == ["api", "overview"]:
        return Reply(200, {
            "node": node.name, "cluster_name": node.name, "product_name": "txamqp09",
            "product_version": __version__,
            "listeners": listeners(node), **group_status(node),
        })
    if segments[:2] == ["api", "health"] or segments[:2] == ["api", "aliveness-test"]:
        return Reply(503, {"status": "failed", "reason": reason, "role": status.role.value})
    return Reply(503, {"error": "not_serving", "reason": reason, "role": status.role.value})


class OperatorLoggedSite(Site):
    """A site whose access log is the operator log's debug lines
    (:func:`~txamqp09.broker.oplog.http_request`): a web UI tab polls the
    API every few seconds and a Prometheus server scrapes as often, for as
    long as the broker runs, so their requests are seen with ``--log-level
    debug`` only."""

    noisy = False

    def log(self, request: http.Request) -> None:
        """One debug line for the answered *request*."""
        client = request.getClientAddress()
        oplog.http_request(
            getattr(client, "host", str(client)),
            request.getUser().decode("utf-8", "replace"),
            request.method.decode("ascii", "replace"),
            request.uri.decode("utf-8", "replace"),
            request.code,
        )


def make_site(node: Node, router: Router | None = None) -> Site:
    """The HTTP site serving *node*'s management API and the web UI."""
    root = UiFiles()
    root.putChild(b"api", ManagementResource(node, router))
    return OperatorLoggedSite(root)
