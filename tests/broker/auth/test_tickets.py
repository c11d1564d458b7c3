"""Access realms and tickets: access.request and the ticket checks of AMQP 0-8/0-9."""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from txamqp09.broker.auth.cred import AMQPUser
from txamqp09.broker.auth.errors import HardAccessRefused
from txamqp09.broker.auth.methods import AccessGuard
from txamqp09.broker.auth.permissions import Permissions, ResourceKind
from txamqp09.broker.auth.realms import AccessRealm, Right, valid_realm_name
from txamqp09.broker.auth.security import Security
from txamqp09.broker.auth.tickets import MAX_TICKET
from txamqp09.broker.auth.users import UserDatabase, VirtualHost
from txamqp09.wire import _amqp0_9 as amqp
from txamqp09.wire.errors import AccessRefused, InvalidPath, NotAllowed

ALL = {"passive": True, "active": True, "write": True, "read": True}


def request(realm: str, **rights: bool) -> Any:
    return amqp.AccessRequest(realm=realm, **rights)


class RealmTests(SynchronousTestCase):
    def test_names_start_with_data_or_admin(self) -> None:
        for name in ["/data", "/admin", "/data/billing", "/admin/x"]:
            self.assertTrue(valid_realm_name(name), name)
        for name in ["", "data", "/database", "/other", "/"]:
            self.assertFalse(valid_realm_name(name), name)

    def test_membership_by_name_or_glob(self) -> None:
        realm = AccessRealm("/data/b", exchanges=("billing.*", "amq.default"), queues=("invoices", "q?"))
        self.assertTrue(realm.contains(ResourceKind.EXCHANGE, "billing.events"))
        self.assertTrue(realm.contains(ResourceKind.EXCHANGE, ""))
        self.assertFalse(realm.contains(ResourceKind.EXCHANGE, "invoices"))
        self.assertTrue(realm.contains(ResourceKind.QUEUE, "invoices"))
        self.assertTrue(realm.contains(ResourceKind.QUEUE, "q1"))
        self.assertFalse(realm.contains(ResourceKind.QUEUE, "q12"))


class TicketTests(SynchronousTestCase):
    """One broker; ``app`` and ``reader`` connect to vhost ``/`` with two realms."""

    def setUp(self) -> None:
        self.database = UserDatabase.default()
        self.database.add_realm("/", AccessRealm("/data/billing", ("billing.*",), ("billing.*",)))
        self.database.add_realm("/", AccessRealm("/data/ops", ("ops.*",), ("ops.*",)))
        for user in ["app", "reader"]:
            self.database.add_user(user, "pw")
            self.database.set_permissions(user, "/", Permissions(".*", ".*", ".*"))
        self.database.grant("app", "/", "/data/billing", list(Right))
        self.database.grant("reader", "/", "/data/billing", [Right.PASSIVE, Right.READ])
        self.security = Security(self.database, Clock())
        self.app = self.connect("app")

    def connect(self, user: str, tickets: bool = True) -> AccessGuard:
        return self.security.open_vhost(AMQPUser(self.database, user), "/", tickets=tickets)

    def test_granted_ticket_allows_its_realm(self) -> None:
        ticket = self.app.request_ticket(1, request("/data/billing", **ALL))
        self.assertGreater(ticket, 0)
        self.app.check(1, amqp.BasicPublish(ticket=ticket, exchange="billing.events"))
        self.app.check(1, amqp.QueueDeclare(ticket=ticket, queue="billing.q"))
        self.app.check(1, amqp.BasicConsume(ticket=ticket, queue="billing.q"))

    def test_refused_request_is_a_connection_exception_alike_for_unknown_realms(self) -> None:
        reader = self.connect("reader")
        errors = []
        for realm in ["/data/billing", "/data/nowhere", "/elsewhere"]:
            with self.assertRaises(HardAccessRefused) as caught:
                reader.request_ticket(1, request(realm, write=True))
            errors.append(caught.exception)
        for error in errors:
            self.assertEqual((error.reply_code, error.hard, error.class_id, error.method_id), (403, True, 30, 10))
        texts = {error.reply_text.replace(realm, "R") for error, realm in zip(errors, ["/data/billing", "/data/nowhere", "/elsewhere"])}
        self.assertEqual(len(texts), 1)

    def test_active_covers_passive_and_rights_must_all_be_held(self) -> None:
        reader = self.connect("reader")
        reader.request_ticket(1, request("/data/billing", passive=True, read=True))
        with self.assertRaises(HardAccessRefused):
            reader.request_ticket(1, request("/data/billing", read=True, active=True))
        self.database.grant("reader", "/", "/data/billing", [Right.ACTIVE])
        reader.request_ticket(1, request("/data/billing", passive=True))

    def test_rights_derive_from_permissions_without_a_grant(self) -> None:
        self.database.set_permissions("reader", "/", Permissions("", "", ".*"))
        reader = self.connect("reader")
        reader.request_ticket(1, request("/data/ops", passive=True, read=True))
        for wanted in [{"active": True}, {"write": True}, {"exclusive": True}]:
            with self.assertRaises(HardAccessRefused):
                reader.request_ticket(1, request("/data/ops", **wanted))

    def test_implicit_data_realm_when_none_is_configured(self) -> None:
        self.database.add_vhost(VirtualHost("plain"))
        self.database.set_permissions("app", "plain", Permissions(".*", ".*", ".*"))
        guard = self.security.open_vhost(AMQPUser(self.database, "app"), "plain", tickets=True)
        ticket = guard.request_ticket(1, request("/data", **ALL))
        guard.check(1, amqp.QueueDeclare(ticket=ticket, queue="anything"))

    def test_ticket_lacking_the_right(self) -> None:
        ticket = self.app.request_ticket(1, request("/data/billing", read=True))
        with self.assertRaises(AccessRefused) as caught:
            self.app.check(1, amqp.BasicPublish(ticket=ticket, exchange="billing.events"))
        self.assertIn("lacks write access: call access.request with write set", caught.exception.reply_text)
        self.assertEqual((caught.exception.class_id, caught.exception.method_id), (60, 40))
        with self.assertRaises(AccessRefused):
            self.app.check(1, amqp.ExchangeDelete(ticket=ticket, exchange="billing.events"))

    def test_passive_declare_needs_only_passive(self) -> None:
        ticket = self.app.request_ticket(1, request("/data/billing", passive=True))
        self.app.check(1, amqp.ExchangeDeclare(ticket=ticket, exchange="billing.events", passive=True))
        self.app.check(1, amqp.QueueDeclare(ticket=ticket, queue="billing.q", passive=True))
        with self.assertRaises(AccessRefused) as caught:
            self.app.check(1, amqp.QueueDeclare(ticket=ticket, queue="billing.q"))
        self.assertIn("lacks active access", caught.exception.reply_text)

    def test_resource_outside_the_tickets_realm(self) -> None:
        ticket = self.app.request_ticket(1, request("/data/billing", **ALL))
        with self.assertRaises(AccessRefused) as caught:
            self.app.check(1, amqp.BasicGet(ticket=ticket, queue="ops.q"))
        self.assertIn("queue 'ops.q' is not in realm '/data/billing'", caught.exception.reply_text)
        with self.assertRaises(AccessRefused) as caught:
            self.app.check(1, amqp.BasicPublish(ticket=ticket, exchange=""))
        self.assertIn("exchange 'amq.default'", caught.exception.reply_text)

    def test_ticket_used_on_another_channel_is_530(self) -> None:
        ticket = self.app.request_ticket(1, request("/data/billing", **ALL))
        with self.assertRaises(NotAllowed) as caught:
            self.app.check(2, amqp.BasicPublish(ticket=ticket, exchange="billing.events"))
        error = caught.exception
        self.assertEqual((error.reply_code, error.hard), (530, True))
        self.assertIn("granted on channel 1 and may not be used on channel 2", error.reply_text)

    def test_unknown_ticket_and_closed_channel(self) -> None:
        with self.assertRaises(AccessRefused):
            self.app.check(1, amqp.BasicPublish(ticket=77, exchange="billing.events"))
        ticket = self.app.request_ticket(1, request("/data/billing", **ALL))
        self.app.channel_closed(1)
        with self.assertRaises(AccessRefused) as caught:
            self.app.check(1, amqp.BasicPublish(ticket=ticket, exchange="billing.events"))
        self.assertIn("never granted, or its channel closed", caught.exception.reply_text)

    def test_requesting_again_replaces_the_ticket(self) -> None:
        first = self.app.request_ticket(1, request("/data/billing", read=True))
        second = self.app.request_ticket(1, request("/data/billing", write=True))
        self.assertNotEqual(first, second)
        with self.assertRaises(AccessRefused):
            self.app.check(1, amqp.BasicGet(ticket=first, queue="billing.q"))
        self.app.check(1, amqp.BasicPublish(ticket=second, exchange="billing.x"))

    def test_exclusive_refused_while_others_hold_tickets(self) -> None:
        other = self.connect("app")
        other.request_ticket(5, request("/data/billing", read=True))
        with self.assertRaises(AccessRefused) as caught:
            self.app.request_ticket(1, request("/data/billing", exclusive=True, **ALL))
        error = caught.exception
        self.assertEqual((error.hard, error.class_id, error.method_id), (False, 30, 10))
        self.assertIn("1 other channel(s) hold tickets on it", error.reply_text)
        other.channel_closed(5)
        self.app.request_ticket(1, request("/data/billing", exclusive=True, **ALL))

    def test_exclusive_granted_when_this_channel_held_the_only_ticket(self) -> None:
        self.app.request_ticket(1, request("/data/billing", read=True))
        self.app.request_ticket(1, request("/data/billing", exclusive=True, **ALL))
        with self.assertRaises(AccessRefused):
            self.app.request_ticket(2, request("/data/billing", read=True))

    def test_exclusive_realm_is_closed_to_every_other_channel(self) -> None:
        ticket = self.app.request_ticket(1, request("/data/billing", exclusive=True, **ALL))
        other = self.connect("reader")
        with self.assertRaises(AccessRefused) as caught:
            other.request_ticket(1, request("/data/billing", read=True))
        self.assertIn("another channel holds it exclusively", caught.exception.reply_text)
        with self.assertRaises(AccessRefused) as caught:
            other.check(1, amqp.BasicGet(queue="billing.q"))
        self.assertIn("realm '/data/billing', which another channel holds exclusively", caught.exception.reply_text)
        other.check(1, amqp.BasicGet(queue="ops.q"))
        self.app.check(1, amqp.BasicGet(ticket=ticket, queue="billing.q"))
        with self.assertRaises(AccessRefused):
            self.app.check(2, amqp.BasicGet(queue="billing.q"))
        self.app.channel_closed(1)
        other.check(1, amqp.BasicGet(queue="billing.q"))
        other.request_ticket(1, request("/data/billing", read=True))

    def test_publish_check_follows_an_exclusive_grant_elsewhere(self) -> None:
        """Realm usage counts its changes: server channels re-check remembered publishes then."""
        other = self.connect("app")
        other.check_publish(1, 0, "billing.events")
        generation = other.tickets.usage.generation
        self.app.request_ticket(1, request("/data/billing", exclusive=True, **ALL))
        self.assertGreater(other.tickets.usage.generation, generation)
        with self.assertRaises(AccessRefused):
            other.check_publish(1, 0, "billing.events")

    def test_ticket_zero_accepted_by_default(self) -> None:
        self.app.check(1, amqp.BasicPublish(exchange="anything"))

    def test_ticket_zero_refused_when_tickets_are_required(self) -> None:
        security = Security(self.database, Clock(), accept_ticket_zero=False)
        guard = security.open_vhost(AMQPUser(self.database, "app"), "/", tickets=True)
        with self.assertRaises(AccessRefused) as caught:
            guard.check(3, amqp.BasicPublish(exchange="billing.events"))
        self.assertIn("requires access tickets: call access.request for a realm holding exchange "
                      "'billing.events' on channel 3", caught.exception.reply_text)
        ticket = guard.request_ticket(3, request("/data/billing", **ALL))
        guard.check(3, amqp.BasicPublish(ticket=ticket, exchange="billing.events"))
        without_tickets = security.open_vhost(AMQPUser(self.database, "app"), "/", tickets=False)
        without_tickets.check(3, amqp.BasicPublish(exchange="billing.events"))

    def test_permissions_still_apply_with_a_ticket(self) -> None:
        ticket = self.app.request_ticket(1, request("/data/billing", **ALL))
        self.database.set_permissions("app", "/", Permissions(".*", "^billing\\.audit$", ".*"))
        with self.assertRaises(AccessRefused) as caught:
            self.app.check(1, amqp.BasicPublish(ticket=ticket, exchange="billing.events"))
        self.assertIn("needs write permission", caught.exception.reply_text)

    def test_ticket_numbers_wrap_and_skip_those_in_use(self) -> None:
        table = self.app.tickets
        first = table.request(1, "/data/billing", [Right.READ])
        table._next = MAX_TICKET
        self.assertEqual(table.request(2, "/data/billing", [Right.READ]), MAX_TICKET)
        self.assertEqual(table.request(3, "/data/billing", [Right.READ]), first + 1)

    def test_fast_path_ticket_checks(self) -> None:
        ticket = self.app.request_ticket(1, request("/data/billing", read=True))
        with self.assertRaises(NotAllowed):
            self.app.check_publish(2, ticket, "billing.events")
        with self.assertRaises(AccessRefused) as caught:
            self.app.check_publish(1, ticket, "billing.events")
        self.assertEqual((caught.exception.class_id, caught.exception.method_id), (60, 40))
        ticket = self.app.request_ticket(1, request("/data/billing", write=True))
        self.app.check_publish(1, ticket, "billing.events")


class OpenVhostTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.database = UserDatabase.default()
        self.database.add_vhost(VirtualHost("private"))
        self.security = Security(self.database, Clock())
        self.guest = AMQPUser(self.database, "guest")

    def test_unknown_vhost_is_402(self) -> None:
        with self.assertRaises(InvalidPath) as caught:
            self.security.open_vhost(self.guest, "missing", tickets=False)
        self.assertEqual((caught.exception.reply_code, caught.exception.class_id, caught.exception.method_id), (402, 10, 40))

    def test_vhost_without_permissions_is_403_on_the_connection(self) -> None:
        with self.assertRaises(HardAccessRefused) as caught:
            self.security.open_vhost(self.guest, "private", tickets=False)
        self.assertEqual((caught.exception.reply_code, caught.exception.hard), (403, True))
        self.assertIn("access to vhost 'private' refused for user 'guest'", caught.exception.reply_text)
