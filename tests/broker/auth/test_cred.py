"""twisted.cred: checkers, the realm, the avatar, the throttle and Security.login."""

from __future__ import annotations

from typing import Any

from twisted.cred.error import UnauthorizedLogin
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.testing.certificates import CertificateAuthority
from tests.broker.auth.test_sasl import amqplain
from txamqp09.broker.auth.cred import AMQPUser, IAMQPUser, LoopbackOnly, make_portal
from txamqp09.broker.auth.errors import LoginRefused
from txamqp09.broker.auth.passwords import PasswordHash
from txamqp09.broker.auth.permissions import Permissions
from txamqp09.broker.auth.realms import Right
from txamqp09.broker.auth.sasl import ExternalCredentials, PasswordCredentials, PeerInfo
from txamqp09.broker.auth.security import Login, Security, refusal_text
from txamqp09.broker.auth.throttle import LoginThrottle
from txamqp09.broker.auth.users import UserDatabase, VirtualHost

LOCAL = PeerInfo(IPv4Address("TCP", "127.0.0.1", 50000))
REMOTE = PeerInfo(IPv4Address("TCP", "192.0.2.7", 50000))
ELSEWHERE = PeerInfo(IPv4Address("TCP", "192.0.2.8", 50000))


def database() -> UserDatabase:
    """guest, plus alice (read-only on /) and certuser (no password)."""
    db = UserDatabase.default()
    db.add_user("alice", "wonderland", tags=("monitoring",))
    db.set_permissions("alice", "/", Permissions("", "", "^alice\\."))
    db.add_user("certuser")
    db.set_permissions("certuser", "/", Permissions(".*", ".*", ".*"))
    return db


def result(deferred: Deferred[Any]) -> Any:
    """The value a Deferred has already fired with (or raise its failure)."""
    outcome: list[Any] = []
    deferred.addBoth(outcome.append)
    assert outcome, "the Deferred has not fired"
    if isinstance(outcome[0], Failure):
        outcome[0].raiseException()
    return outcome[0]


class PortalTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.portal, self.realm = make_portal(database())

    def login(self, credentials: Any) -> Any:
        return result(self.portal.login(credentials, None, IAMQPUser))

    def test_password_login_gives_the_avatar(self) -> None:
        interface, avatar, _ = self.login(PasswordCredentials("alice", "wonderland", "PLAIN", REMOTE))
        self.assertIs(interface, IAMQPUser)
        self.assertTrue(IAMQPUser.providedBy(avatar))
        self.assertEqual((avatar.name, avatar.tags), ("alice", ("monitoring",)))

    def test_wrong_password_and_unknown_user_fail_alike(self) -> None:
        failures = []
        for credentials in [
            PasswordCredentials("alice", "looking-glass", "PLAIN", LOCAL),
            PasswordCredentials("nobody", "wonderland", "PLAIN", LOCAL),
            PasswordCredentials("certuser", "", "PLAIN", LOCAL),
        ]:
            with self.assertRaises(UnauthorizedLogin) as caught:
                self.login(credentials)
            failures.append((type(caught.exception), str(caught.exception)))
        self.assertEqual(len(set(failures)), 1)

    def test_guest_only_from_loopback(self) -> None:
        for peer in [LOCAL, PeerInfo(IPv6Address("TCP", "::1", 1))]:
            self.assertEqual(self.login(PasswordCredentials("guest", "guest", "PLAIN", peer))[1].name, "guest")
        with self.assertRaises(LoopbackOnly) as caught:
            self.login(PasswordCredentials("guest", "guest", "PLAIN", REMOTE))
        self.assertIn("can only connect via localhost", str(caught.exception))

    def test_wrong_guest_password_from_afar_does_not_mention_loopback(self) -> None:
        with self.assertRaises(UnauthorizedLogin) as caught:
            self.login(PasswordCredentials("guest", "nope", "PLAIN", REMOTE))
        self.assertNotIsInstance(caught.exception, LoopbackOnly)

    def test_external_login_needs_an_existing_user(self) -> None:
        pki = CertificateAuthority()
        peer = PeerInfo(REMOTE.address, pki.client_certificate("certuser"))
        avatar = self.login(ExternalCredentials("certuser", peer.certificate, peer))[1]  # type: ignore[arg-type]
        self.assertEqual(avatar.name, "certuser")
        with self.assertRaises(UnauthorizedLogin):
            self.login(ExternalCredentials("stranger", peer.certificate, peer))  # type: ignore[arg-type]

    def test_logout_counts_connections_down_once(self) -> None:
        credentials = PasswordCredentials("alice", "wonderland", "PLAIN", REMOTE)
        first, second = self.login(credentials)[2], self.login(credentials)[2]
        self.assertEqual(self.realm.connections("alice"), 2)
        first()
        first()
        self.assertEqual(self.realm.connections("alice"), 1)
        second()
        self.assertEqual(self.realm.connections("alice"), 0)


class AvatarTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.database = database()
        self.database.add_vhost(VirtualHost("other"))
        self.alice = AMQPUser(self.database, "alice")

    def test_permissions_are_regex_searches(self) -> None:
        self.assertTrue(self.alice.can_read("/", "alice.inbox"))
        self.assertFalse(self.alice.can_read("/", "bob.inbox"))
        self.assertFalse(self.alice.can_write("/", "alice.inbox"))
        self.assertFalse(self.alice.can_configure("/", "alice.inbox"))
        self.assertFalse(self.alice.can_read("other", "alice.inbox"))

    def test_a_match_anywhere_in_the_name_counts(self) -> None:
        self.database.set_permissions("alice", "/", Permissions("log", "", "box$"))
        self.assertTrue(self.alice.can_configure("/", "app.log.errors"))
        self.assertTrue(self.alice.can_read("/", "inbox"))
        self.assertFalse(self.alice.can_read("/", "boxes"))

    def test_default_exchange_is_checked_as_amq_default(self) -> None:
        self.database.set_permissions("alice", "/", Permissions("", "^amq\\.default$", ""))
        self.assertTrue(self.alice.can_write("/", ""))
        self.assertFalse(self.alice.can_write("/", "amq.direct"))

    def test_vhost_access(self) -> None:
        self.assertTrue(self.alice.may_open_vhost("/"))
        self.assertFalse(self.alice.may_open_vhost("other"))
        self.assertFalse(self.alice.may_open_vhost("missing"))
        self.database.set_permissions("alice", "other", Permissions("", "", ""))
        self.assertTrue(self.alice.may_open_vhost("other"))

    def test_changes_apply_to_existing_avatars(self) -> None:
        self.database.set_permissions("alice", "/", Permissions(".*", ".*", ".*"))
        self.assertTrue(self.alice.can_configure("/", "anything"))
        self.database.delete_user("alice")
        self.assertFalse(self.alice.can_read("/", "alice.inbox"))
        self.assertEqual(self.alice.tags, ())

    def test_realm_rights_derived_then_granted(self) -> None:
        self.assertEqual(self.alice.realm_rights("/", "/data"), {Right.PASSIVE, Right.READ})
        self.database.grant("alice", "/", "/data", [Right.READ, Right.EXCLUSIVE])
        self.assertEqual(self.alice.realm_rights("/", "/data"), {Right.READ, Right.EXCLUSIVE})
        self.assertEqual(self.alice.realm_rights("other", "/data"), frozenset())


class ThrottleTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.throttle = LoginThrottle(
            self.clock, base=1.0, cap=8.0, window=60.0, max_held_per_host=2, max_held=3, max_records=3
        )

    def fail(self, user: str | None, host: str) -> None:
        """Record a failure and let its refusal go."""
        self.throttle.failed(user, host)
        self.clock.advance(self.throttle.cap)

    def test_delay_doubles_per_failure_up_to_the_cap(self) -> None:
        delays = []
        for _ in range(6):
            self.fail("u", "h")
            delays.append(self.throttle.delay("u", "h"))
        self.assertEqual(delays, [1.0, 2.0, 4.0, 8.0, 8.0, 8.0])

    def test_users_and_hosts_are_counted_separately(self) -> None:
        self.fail("u", "a")
        self.fail("u", "a")
        self.assertEqual(
            [self.throttle.delay(*key) for key in [("u", "a"), ("v", "a"), ("u", "b"), (None, "a")]],
            [2.0, 0.0, 0.0, 0.0],
        )

    def test_refusal_fires_after_the_delay(self) -> None:
        self.fail("u", "h")
        fired: list[None] = []
        held = self.throttle.failed("u", "h")
        assert held is not None
        held.addCallback(fired.append)
        self.clock.advance(1.9)
        self.assertEqual(fired, [])
        self.clock.advance(0.1)
        self.assertEqual(fired, [None])

    def test_held_refusals_are_bounded_per_host_and_in_all(self) -> None:
        first = self.throttle.failed("u", "h")
        self.throttle.failed("v", "h")
        self.assertIsNone(self.throttle.failed("w", "h"))
        self.assertEqual(
            (self.throttle.held("h"), self.throttle.may_hold("h"), self.throttle.may_hold("g")), (2, False, True)
        )
        self.assertIsNotNone(self.throttle.failed("u", "g"))
        self.assertEqual((self.throttle.held(), self.throttle.may_hold("f")), (3, False))
        self.assertEqual(self.throttle.delay("w", "h"), 1.0)
        assert first is not None
        first.cancel()
        self.failureResultOf(first, CancelledError)
        self.assertEqual((self.throttle.held("h"), self.throttle.may_hold("h")), (1, True))
        self.clock.advance(1.0)
        self.assertEqual(self.throttle.held(), 0)

    def test_quiet_window_forgives(self) -> None:
        self.fail("u", "h")
        self.clock.advance(60.0 - self.throttle.cap)
        self.assertEqual(self.throttle.delay("u", "h"), 1.0)
        self.clock.advance(0.1)
        self.assertEqual(self.throttle.delay("u", "h"), 0.0)
        self.fail("u", "h")
        self.assertEqual(self.throttle.delay("u", "h"), 1.0)

    def test_memory_is_bounded(self) -> None:
        for host in ["a", "b", "c", "d"]:
            self.fail("u", host)
        self.assertEqual(self.throttle.delay("u", "a"), 0.0)
        self.assertEqual(self.throttle.delay("u", "d"), 1.0)


class SecurityLoginTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.security = Security(database(), self.clock)

    def login(self, mechanism: str, response: bytes, peer: PeerInfo = REMOTE) -> Deferred[Login]:
        return self.security.login(mechanism, response, peer)

    def refused(self, deferred: Deferred[Any]) -> LoginRefused:
        self.clock.advance(60)
        return self.failureResultOf(deferred, LoginRefused).value  # type: ignore[return-value]

    def count_password_checks(self) -> list[str]:
        """The passwords checked against a stored hash from now on, in order."""
        checks: list[str] = []
        verify = PasswordHash.verify

        def counted(hashed: PasswordHash, password: str) -> bool:
            checks.append(password)
            return verify(hashed, password)

        self.patch(PasswordHash, "verify", counted)
        return checks

    def test_plain_and_amqplain_logins(self) -> None:
        login = self.successResultOf(self.login("PLAIN", b"\x00alice\x00wonderland"))
        self.assertEqual(login.user.name, "alice")
        login = self.successResultOf(self.login("AMQPLAIN", amqplain({"LOGIN": b"alice", "PASSWORD": b"wonderland"})))
        self.assertEqual(login.user.name, "alice")
        login.logout()
        self.assertEqual(self.security.realm.connections("alice"), 1)

    def test_one_generic_text_for_wrong_password_and_unknown_user(self) -> None:
        texts = {
            self.refused(self.login("PLAIN", b"\x00alice\x00wrong")).reply_text,
            self.refused(self.login("PLAIN", b"\x00nobody\x00wonderland")).reply_text,
        }
        self.assertEqual(texts, {refusal_text("PLAIN")})
        self.assertIn("Login was refused using authentication mechanism PLAIN", refusal_text("PLAIN"))

    def test_refusal_is_a_connection_close_403_on_start_ok(self) -> None:
        error = self.refused(self.login("AMQPLAIN", amqplain({"LOGIN": b"x", "PASSWORD": b"y"})))
        self.assertEqual((error.reply_code, error.hard, error.class_id, error.method_id), (403, True, 10, 11))
        self.assertEqual(error.reply_text, refusal_text("AMQPLAIN"))

    def test_malformed_response_says_what_is_wrong(self) -> None:
        error = self.refused(self.login("PLAIN", b"alice:wonderland"))
        self.assertIn("authzid NUL user NUL password", error.reply_text)

    def test_guest_from_afar_is_told_why(self) -> None:
        error = self.refused(self.login("PLAIN", b"\x00guest\x00guest"))
        self.assertEqual(error.reply_text, "ACCESS_REFUSED - user 'guest' can only connect via localhost")
        self.successResultOf(self.login("PLAIN", b"\x00guest\x00guest", LOCAL))

    def test_refusals_wait_but_a_correct_password_does_not(self) -> None:
        self.refused(self.login("PLAIN", b"\x00alice\x00wrong"))
        waiting = self.login("PLAIN", b"\x00alice\x00wrong")
        malformed = self.login("PLAIN", b"garbage")
        self.assertEqual(self.security.throttle.delay("alice", REMOTE.host), 1.0)
        self.assertEqual(self.successResultOf(self.login("PLAIN", b"\x00alice\x00wonderland")).user.name, "alice")
        self.assertNoResult(waiting)
        self.assertNoResult(malformed)
        self.clock.advance(0.5)
        self.failureResultOf(malformed, LoginRefused)
        self.assertNoResult(waiting)
        self.clock.advance(0.5)
        self.failureResultOf(waiting, LoginRefused)

    def guess(self, user: str, peer: PeerInfo = REMOTE) -> Deferred[type[LoginRefused]]:
        """A wrong password for *user* from *peer*: fires with LoginRefused
        when it is refused."""
        refused = self.login("PLAIN", f"\x00{user}\x00wrong".encode(), peer)
        return refused.addErrback(lambda failure: failure.trap(LoginRefused))  # type: ignore[return-value]

    def test_a_flood_does_not_shut_out_a_correct_login(self) -> None:
        """While a host holds max_held_per_host refusals of a user, a correct
        password of that user from that host, never seen before, gets in at
        once; a wrong one is checked too and refused at once, saying why."""
        checks = self.count_password_checks()
        throttle = self.security.throttle
        for _ in range(throttle.max_held_per_host):
            self.guess("alice")
        self.assertFalse(throttle.may_hold(REMOTE.host))
        checks.clear()
        self.assertEqual(self.successResultOf(self.login("PLAIN", b"\x00alice\x00wonderland")).user.name, "alice")
        refusal = self.failureResultOf(self.login("PLAIN", b"\x00alice\x00wrong"), LoginRefused).value
        self.assertEqual(checks, ["wonderland", "wrong"])
        self.assertEqual(
            refusal.reply_text,  # type: ignore[attr-defined]
            f"{refusal_text('PLAIN')} Answered at once: {throttle.max_held_per_host} refused logins "
            f"from {REMOTE.host} are already waiting for their reply.",
        )
        self.assertEqual(throttle.held(REMOTE.host), throttle.max_held_per_host)

    def test_the_held_refusals_of_all_hosts_are_bounded(self) -> None:
        throttle = self.security.throttle
        throttle.max_held = 3
        for n in range(throttle.max_held):
            self.guess("alice", PeerInfo(IPv4Address("TCP", f"192.0.2.{10 + n}", 50000)))
        refusal = self.failureResultOf(self.login("PLAIN", b"\x00alice\x00wrong"), LoginRefused).value
        self.assertIn("Answered at once: 3 refused logins are already waiting", refusal.reply_text)  # type: ignore[attr-defined]
        self.assertEqual(self.successResultOf(self.login("PLAIN", b"\x00alice\x00wonderland")).user.name, "alice")

    def test_a_flood_holds_a_bounded_number_of_connections(self) -> None:
        """A host sending wrong passwords for alice as fast as it can (50
        every 50 ms) for 10 s: every one is refused, at most
        max_held_per_host wait at once, and a correct login of alice from the
        same host, once a second, is let in at once."""
        throttle = self.security.throttle
        seconds, tick, burst = 10, 0.05, 50
        refused: list[Deferred[type[LoginRefused]]] = []
        most_held, correct = 0, []
        for step in range(round(seconds / tick)):
            refused.extend(self.guess("alice") for _ in range(burst))
            most_held = max(most_held, throttle.held(REMOTE.host))
            if step % round(1 / tick) == 0:
                correct.append(self.successResultOf(self.login("PLAIN", b"\x00alice\x00wonderland")).user.name)
            self.clock.advance(tick)
        self.clock.advance(throttle.cap)
        self.assertEqual(correct, ["alice"] * seconds)
        self.assertEqual(most_held, throttle.max_held_per_host)
        self.assertEqual({self.successResultOf(deferred) for deferred in refused}, {LoginRefused})
        self.assertEqual(throttle.held(), 0)

    def test_unexpected_errors_are_not_disguised_as_refusals(self) -> None:
        def broken(*args: Any) -> Any:
            raise RuntimeError("bug")

        self.security.realm.requestAvatar = broken  # type: ignore[method-assign]
        failure = self.failureResultOf(self.login("PLAIN", b"\x00alice\x00wonderland"))
        self.assertTrue(failure.check(RuntimeError))


class DirectLoginTests(SynchronousTestCase):
    """Logins a broker hands its own links (URIs without a host or password),
    as RabbitMQ's direct connections: user ``none`` with every right, or a
    named user without a password; a password for its user only."""

    def setUp(self) -> None:
        self.clock = Clock()
        self.security = Security(database(), self.clock)

    def login(self, name: str, password: str, mechanism: str = "PLAIN") -> Deferred[Login]:
        if mechanism == "PLAIN":
            response = b"\x00" + name.encode() + b"\x00" + password.encode()
        else:
            response = amqplain({"LOGIN": name.encode(), "PASSWORD": password.encode()})
        return self.security.login(mechanism, response, REMOTE)

    def assertRefused(self, name: str, password: str) -> None:
        refusing = self.login(name, password)
        self.clock.advance(60)
        self.failureResultOf(refusing, LoginRefused)

    def test_no_user_is_none_with_every_right(self) -> None:
        name, password = self.security.direct_login(None)
        self.assertEqual(name, "none")
        user = self.successResultOf(self.login(name, password)).user
        self.assertEqual((user.name, user.tags), ("none", ()))
        self.security.database.add_vhost(VirtualHost("other"))
        self.assertTrue(user.may_open_vhost("other"))
        self.assertFalse(user.may_open_vhost("missing"))
        self.assertTrue(all(check("other", "any.thing") for check in (user.can_configure, user.can_write, user.can_read)))
        self.assertEqual(user.realm_rights("/", "/data"), frozenset(Right))
        guard = self.security.open_vhost(user, "/", tickets=False)
        self.assertIs(guard.user, user)

    def test_a_named_user_without_a_password(self) -> None:
        name, password = self.security.direct_login("alice")
        self.assertEqual(name, "alice")
        login = self.successResultOf(self.login(name, password, "AMQPLAIN"))
        self.assertIsInstance(login.user, AMQPUser)
        self.assertEqual(login.user.name, "alice")
        self.assertFalse(login.user.can_write("/", "anything"), "alice keeps her own permissions")
        self.assertEqual(self.security.realm.connections("alice"), 1)
        login.logout()
        self.assertEqual(self.security.realm.connections("alice"), 0)

    def test_a_password_for_its_user_only(self) -> None:
        name, password = self.security.direct_login(None)
        self.assertEqual(self.security.direct_login(None), (name, password), "one password per user acted as")
        self.successResultOf(self.login(name, password))
        self.successResultOf(self.login(name, password))
        self.assertRefused("alice", password)
        _, alice = self.security.direct_login("alice")
        self.assertNotEqual(alice, password)
        self.assertRefused("certuser", alice)
        self.assertRefused("none", alice)
        self.assertRefused("alice", alice + "x")
        self.assertEqual(self.successResultOf(self.login("alice", alice)).user.name, "alice")

    def test_a_deleted_user_is_refused(self) -> None:
        name, password = self.security.direct_login("alice")
        self.security.database.delete_user("alice")
        self.assertRefused(name, password)

    def test_each_broker_its_own(self) -> None:
        other = Security(database(), self.clock)
        self.assertRefused(*other.direct_login(None))
