"""The management web UI in headless Chromium, against a broker in a child
process: log-in, and what each page shows and does, checked over AMQP and
the API. (tests/test_packaging.py checks an installed copy has every UI file.)"""

from __future__ import annotations

import json
import os
import re
import ssl
import threading
from typing import Any

from tests.management.browser import WAIT, BrokerChild, BrowserTestCase
from txamqp09.testing.certificates import shared_files
from txamqp09.testing.postgresql import psycopg_missing, shared_postgresql


class LoginTests(BrowserTestCase):
    """Log-in with the API's users and tags."""

    def test_guest_logs_in_and_sees_the_overview(self) -> None:
        self.log_in()
        self.text_of("#total-exchanges .value", r"^\d+$")
        self.text_of("header nav a.active", "^Overview$")

    def test_wrong_password_is_refused(self) -> None:
        self.open()
        self.type_into("#login-user", "guest")
        self.type_into("#login-password", "wrong")
        self.element("#login-submit").click()
        self.text_of("#login-error", "Login failed")
        self.assertFalse(self.element("#login-screen").get_attribute("hidden"))
        self.assertEqual(self.browser.find_element("css selector", "#app-screen").is_displayed(), False)

    def test_user_without_management_tag_is_refused(self) -> None:
        self.broker.api("PUT", "/api/users/plain", {"password": "secret", "tags": ""})
        self.open()
        self.type_into("#login-user", "plain")
        self.type_into("#login-password", "secret")
        self.element("#login-submit").click()
        self.text_of("#login-error", "Not management user")

    def test_log_out_returns_to_the_log_in_form(self) -> None:
        self.log_in()
        self.element("#logout").click()
        self.element("#login-user")
        self.open()
        self.element("#login-user")


def amqp(broker: BrokerChild) -> Any:
    """A pika connection to *broker* (closed by the caller)."""
    import pika

    return pika.BlockingConnection(pika.URLParameters(broker.amqp_url))


class QueueTests(BrowserTestCase):
    """The Queues pages: create, bind, publish, get, purge, delete."""

    def setUp(self) -> None:
        super().setUp()
        self.connection = amqp(self.broker)
        self.addCleanup(self.connection.close)
        self.channel = self.connection.channel()
        self.log_in()

    def test_create_a_queue_and_a_binding_and_see_them_over_amqp(self) -> None:
        self.open("/queues")
        self.submit_form("add-queue", "Queue orders added", vhost="/", name="orders", durable=True)
        self.text_of("#queues a.queue-link", "^orders$")
        declared = self.channel.queue_declare("orders", passive=True)
        self.assertEqual(declared.method.message_count, 0)
        self.text_of("#queues tbody", r"orders\s+classic\s+D\b")
        self.element("#queues a.queue-link").click()
        self.wait_shown("/queues/%2F/orders")
        self.text_of("#queue-details", r"Features\s+D\b")
        self.submit_form("add-binding", "Bound", source="amq.direct", routing_key="new-orders")
        self.text_of("#queue-bindings", "new-orders")
        self.channel.basic_publish("amq.direct", "new-orders", b"order 1")
        method, _, body = self.channel.basic_get("orders", auto_ack=True)
        self.assertEqual(body, b"order 1")

    def test_remove_a_binding(self) -> None:
        self.channel.queue_declare("orders")
        self.channel.queue_bind("orders", "amq.direct", "old-orders")
        self.open("/queues/%2F/orders")
        self.text_of("#queue-bindings", "old-orders")
        self.element("#queue-bindings button.unbind").click()
        self.wait_for(lambda browser: "old-orders" not in browser.find_element("css selector", "#queue-bindings").text,
                      "the binding is still shown")
        self.channel.basic_publish("amq.direct", "old-orders", b"lost")
        self.assertEqual(self.channel.basic_get("orders", auto_ack=True), (None, None, None))

    def test_publish_from_the_ui_and_get_it_over_amqp(self) -> None:
        self.channel.queue_declare("inbox")
        self.open("/queues/%2F/inbox")
        self.submit_form("publish", "^Message published.$", payload="hello from the UI",
                         properties='{"content_type": "text/plain"}', delivery_mode="2")
        method, properties, body = self.channel.basic_get("inbox", auto_ack=True)
        self.assertEqual(body, b"hello from the UI")
        self.assertEqual((properties.content_type, properties.delivery_mode), ("text/plain", 2))

    def test_get_a_message_published_over_amqp(self) -> None:
        import pika

        self.channel.queue_declare("outbox")
        self.channel.basic_publish("", "outbox", b"from pika", pika.BasicProperties(headers={"x-seen": "no"}))
        self.open("/queues/%2F/outbox")
        self.submit_form("get-messages", r"^1 message\(s\)\.$", ackmode="ack_requeue_false", encoding="auto")
        self.text_of("#got-messages pre.payload", "^from pika$")
        self.text_of("#got-messages", "x-seen")
        self.assertEqual(self.channel.queue_declare("outbox", passive=True).method.message_count, 0)

    def test_purge(self) -> None:
        self.channel.queue_declare("full")
        for number in range(3):
            self.channel.basic_publish("", "full", b"%d" % number)
        self.open("/queues/%2F/full")
        self.text_of("#queue-details", r"Total\s*3")
        self.submit_form("purge", "^Purged.$")
        self.assertEqual(self.channel.queue_declare("full", passive=True).method.message_count, 0)

    def test_delete(self) -> None:
        import pika.exceptions

        self.channel.queue_declare("doomed")
        self.channel.basic_publish("", "doomed", b"x")
        self.open("/queues/%2F/doomed")
        self.submit_form("delete-queue", "inequivalent|not empty|empty", **{"if-empty": True})
        self.submit_form("delete-queue", "^Deleted.$", **{"if-empty": False})
        self.element("#queue-gone")
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as closed:
            self.channel.queue_declare("doomed", passive=True)
        self.assertEqual(closed.exception.reply_code, 404)

    def test_forms_show_the_apis_reason(self) -> None:
        self.channel.queue_declare("plain", durable=False)
        self.open("/queues")
        text = self.submit_form("add-queue", "inequivalent", vhost="/", name="plain", durable=True)
        self.assertIn("durable", text)
        self.submit_form("add-queue", "^Arguments is not JSON", vhost="/", name="other", arguments="{nope")


#: Every permission.
ALL = {"configure": ".*", "write": ".*", "read": ".*"}


def add_vhost(broker: BrokerChild, name: str) -> None:
    """A vhost *name* on which guest has every permission."""
    broker.api("PUT", f"/api/vhosts/{name}", {})
    broker.api("PUT", f"/api/permissions/{name}/guest", ALL)


class Publisher:
    """Publishes to a queue of *broker* from a thread until stopped."""

    def __init__(self, broker: BrokerChild, queue: str) -> None:
        self.broker = broker
        self.queue = queue
        self.published = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Publisher":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        connection = amqp(self.broker)
        try:
            channel = connection.channel()
            channel.queue_declare(self.queue, arguments={"x-max-length": 1000})
            while not self._stop.is_set():
                for _ in range(20):
                    channel.basic_publish("", self.queue, b"tick")
                    self.published += 1
                # Let the broker's frames (flow, close) in between batches.
                connection.process_data_events(0.02)
        finally:
            connection.close()


class OverviewTests(BrowserTestCase):
    """The Overview page's figures move with the broker."""

    def test_publish_rate_moves_while_a_publisher_runs(self) -> None:
        self.log_in()
        self.text_of("#rate-publish .rate", r"^0\.0/s$")
        with Publisher(self.broker, "ticks"):
            self.text_of("#rate-publish .rate", r"^(?!0\.0/s)\d+(\.\d)?/s$")
            self.text_of("#queued-messages_ready td", "^[1-9]")
            self.text_of("#total-connections .value", "^1$")
            self.wait_for(lambda browser: float(browser.find_element("css selector", "#chart-message-rates")
                                                .get_attribute("data-peak") or 0) > 0,
                          "the message rate chart stays flat")
        self.text_of("#total-queues .value", "^1$")

    def test_node_figures_and_listeners(self) -> None:
        self.log_in()
        self.text_of("#node-memory", r"of high watermark \d")
        self.text_of("#node-disk", r"free.*limit|limit")
        self.text_of("#node-store", rf"^[1-9][\d.,]* \w*B in {re.escape(self.broker.data_dir)}$")
        self.text_of("#listeners", rf"amqp\s+127\.0\.0\.1\s+{self.broker.ports['amqp']}")


class GroupTests(BrowserTestCase):
    """Two brokers of a group on one PostgreSQL database: the active one's
    Overview shows the members and the lease; the standby's log-in screen
    says it is a standby and links to the active one's UI."""

    skip = psycopg_missing() or BrowserTestCase.skip

    def setUp(self) -> None:
        self.url = shared_postgresql().new_database()
        super().setUp()

    def member_options(self, name: str) -> tuple[str, ...]:
        return ("--store", self.url, "--node-name", name, "--lease-period", "3", "--lease-renew", "0.5")

    def broker_options(self) -> tuple[str, ...]:
        return self.member_options("node-a")

    def test_overview_shows_the_group_and_a_standby_points_to_the_active_broker(self) -> None:
        standby = BrokerChild(os.path.join(self.work, "standby"), *self.member_options("node-b"),
                              ready="group role standby")
        standby.start()
        self.addCleanup(standby.stop)
        self.log_in()
        self.text_of("#group-role", "^active$")
        self.text_of("#group-lease", r"^held by node-a, epoch \d+, expires in \d")
        self.text_of("#member-node-a .role", "^active$")
        self.text_of("#member-node-b .role", "^standby$")
        self.text_of("#member-node-a", rf"127\.0\.0\.1:{self.broker.ports['amqp']}")
        self.browser.get(f"{standby.url}/")
        self.text_of("#standby-notice", "node-b.*standby member")
        link = self.element("#active-ui")
        self.assertEqual(link.get_attribute("href"), f"{self.broker.url}/")
        self.type_into("#login-user", "guest")
        self.type_into("#login-password", "guest")
        self.element("#login-submit").click()
        self.text_of("#login-error", "standby member of its group.*the active broker is node-a")


class ConnectionTests(BrowserTestCase):
    """Connections and Channels pages, and closing a connection."""

    def test_connection_page_and_close(self) -> None:
        import pika
        import pika.exceptions

        parameters = pika.URLParameters(self.broker.amqp_url)
        parameters.client_properties = {"connection_name": "doomed-client"}
        connection = pika.BlockingConnection(parameters)
        self.addCleanup(lambda: connection.is_open and connection.close())
        connection.channel().confirm_delivery()
        self.log_in()
        self.open("/channels")
        self.text_of("#channels tbody", "guest")
        self.open("/connections")
        self.text_of("#connections tbody", "doomed-client")
        self.element("#connections a.connection-link").click()
        self.wait_shown("/connections/.+")
        self.text_of("#client-properties", "doomed-client")
        self.text_of("#connection-tls", "Not using TLS")
        self.text_of("#connection-channels tbody", r"\(1\)")
        self.submit_form("close-connection", "^Closed.$", reason="maintenance")
        with self.assertRaises(pika.exceptions.ConnectionClosedByBroker) as closed:
            connection.process_data_events(WAIT)
        self.assertEqual(closed.exception.reply_code, 320)
        self.assertIn("maintenance", closed.exception.reply_text)
        self.element("#connection-closed")


class TlsConnectionTests(BrowserTestCase):
    """A connection over TLS is shown as one, with the TLS details the API
    gives (the API leaves the protocol and cipher empty)."""

    def broker_options(self) -> tuple[str, ...]:
        files = shared_files()
        return ("--listen", f"ssl:0:interface=127.0.0.1:privateKey={files.server_key}:certKey={files.server_cert}")

    def test_tls_details(self) -> None:
        import pika

        context = ssl.create_default_context(cafile=shared_files().ca)
        context.check_hostname = False
        tls_port = self.broker.listeners["amqp"][1]
        parameters = pika.ConnectionParameters("127.0.0.1", tls_port, ssl_options=pika.SSLOptions(context),
                                               client_properties={"connection_name": "over-tls"})
        connection = pika.BlockingConnection(parameters)
        self.addCleanup(connection.close)
        self.log_in()
        self.open("/connections")
        self.text_of("#connections tbody", r"over-tls.*\bTLS\b")
        self.element("#connections a.connection-link").click()
        self.wait_shown("/connections/.+")
        self.text_of("#connection-tls", "Peer certificate subject")
        self.text_of("#connection-tls", r"Protocol\s+tlsv1\.[23]")
        self.text_of("#connection-tls", r"Cipher\s+\w*aes\w*|Cipher\s+chacha20")
        self.assertNotIn("Not using TLS", self.element("#connection-tls").text)


class ExchangeTests(BrowserTestCase):
    """The Exchanges pages: add, bind, publish."""

    def test_add_an_exchange_bind_it_and_publish(self) -> None:
        connection = amqp(self.broker)
        self.addCleanup(connection.close)
        channel = connection.channel()
        channel.queue_declare("audit")
        self.log_in()
        self.open("/exchanges")
        self.submit_form("add-exchange", "Exchange events added", vhost="/", name="events", type="topic")
        self.text_of("#exchanges a.exchange-link", "^events$")
        self.text_of("#exchanges tbody", r"events\s+topic\s+D\b")
        self.open("/exchanges/%2F/events")
        self.text_of("#exchange-details", r"topic\s+Features\s+D\b")
        self.submit_form("add-binding", "Bound", kind="queue", destination="audit", routing_key="user.*")
        self.text_of("#exchange-bindings", "user.*")
        self.submit_form("publish", "^Message published.$", routing_key="user.created", payload="ann")
        self.assertEqual(channel.basic_get("audit", auto_ack=True)[2], b"ann")
        self.submit_form("publish", "not routed", routing_key="order.created", payload="lost")


class ManyQueuesTests(BrowserTestCase):
    """10,000 queues: one page of rows in the DOM, filtered and paged by the API."""

    def test_ten_thousand_queues(self) -> None:
        queues = [{"name": f"q{number:05d}", "vhost": "/", "durable": True, "auto_delete": False, "arguments": {}}
                  for number in range(10000)]
        self.broker.api("POST", "/api/definitions", {"queues": queues})
        self.log_in()
        self.open("/queues")
        self.text_of("#queues-summary", r"^20 of 10,000 matching \(10,000 in all\)$")
        self.assertEqual(len(self.browser.find_elements("css selector", "#queues tbody tr")), 20)
        self.text_of("#queues .pages", "Page 1 of 500")
        self.element("#queues-next").click()
        self.text_of("#queues tbody tr:first-child a.queue-link", "^q00020$")
        self.element('#queues button.sort[data-sort="name"]').click()
        self.text_of("#queues tbody tr:first-child a.queue-link", "^q09999$")
        self.type_into("#queues-filter", "q0424")
        self.text_of("#queues-summary", r"^10 of 10 matching \(10,000 in all\)$")
        self.element("#queues-regex").click()
        self.type_into("#queues-filter", "^q0424[05]$")
        self.text_of("#queues-summary", r"^2 of 2 matching")


#: Holds the UI's requests of /api/overview until ``window.releaseOverview()``;
#: ``window.overviewAsked`` counts them, and ``window.overviewRead`` turns
#: true in the first task after the UI has read a released answer (every
#: step the UI takes with it, promise callbacks, has run by then).
HOLD_OVERVIEW = """
const send = window.fetch;
const held = [];
window.overviewAsked = 0;
window.overviewRead = false;
window.releaseOverview = () => held.splice(0).forEach((release) => release());
window.fetch = (url, init) => {
  if (!String(url).startsWith("/api/overview")) return send(url, init);
  window.overviewAsked += 1;
  return new Promise((release) => held.push(release)).then(() => send(url, init)).then((answer) => {
    const read = answer.text.bind(answer);
    answer.text = () => read().then((body) => {
      setTimeout(() => { window.overviewRead = true; }, 0);
      return body;
    });
    return answer;
  });
};
"""


class NavigationTests(BrowserTestCase):
    """Moving between pages while answers are under way."""

    def test_a_page_left_before_its_first_answer_leaves_the_next_page_shown(self) -> None:
        # A user without the monitoring tag: the Overview asks /api/overview only.
        self.broker.api("PUT", "/api/users/viewer", {"password": "pw", "tags": "management"})
        self.open()
        self.browser.execute_script(HOLD_OVERVIEW)
        self.type_into("#login-user", "viewer")
        self.type_into("#login-password", "pw")
        self.element("#login-submit").click()
        self.text_of("#current-user", "^viewer$")
        self.wait_for(lambda browser: browser.execute_script("return window.overviewAsked"), "no overview asked for")
        self.browser.execute_script("location.hash = '#/queues'")
        self.wait_shown("/queues")
        self.browser.execute_script("window.releaseOverview()")
        self.wait_for(lambda browser: browser.execute_script("return window.overviewRead"), "the overview never read")
        self.assertEqual(self.browser.execute_script("return document.body.dataset.shown"), "/queues")


class AdminTests(BrowserTestCase):
    """The Admin page: users, definitions; what a management-only user sees."""

    def test_add_a_user_with_tags_and_log_in_as_it(self) -> None:
        self.log_in()
        self.open("/admin")
        self.submit_form("add-user", "User ops saved", name="ops", password="s3cret", tags="monitoring")
        self.text_of("#users tbody", r"ops\s+monitoring")
        self.submit_form("set-permission", "Permission set", user="ops", vhost="/")
        self.text_of("#permissions tbody", r"ops\s+/")
        self.element("#logout").click()
        self.log_in("ops", "s3cret")
        self.text_of("#node-memory", "high watermark")
        self.assertEqual(self.broker.api("GET", "/api/whoami", user="ops", password="s3cret")["tags"], ["monitoring"])

    def test_export_definitions_and_import_them_into_a_second_broker(self) -> None:
        add_vhost(self.broker, "shop")
        self.broker.api("PUT", "/api/queues/shop/orders", {"durable": True})
        self.broker.api("PUT", "/api/users/ann", {"password": "pw", "tags": "management"})
        self.broker.api("PUT", "/api/policies/shop/cap", {"pattern": "^orders$", "definition": {"max-length": 5}})
        self.log_in()
        self.open("/admin")
        self.submit_form("export-definitions", r"^Saved as txamqp09-definitions-[\d-]+\.json\.$")
        exported = self.wait_for(lambda _: [name for name in os.listdir(self.downloads) if name.endswith(".json")],
                                 "no definitions file downloaded")
        path = os.path.join(self.downloads, exported[0])
        with open(path) as saved:
            self.assertIn("orders", [queue["name"] for queue in json.load(saved)["queues"]])
        second = self.start_broker("second")
        self.broker = second
        self.log_in()
        self.open("/admin")
        self.submit_form("import-definitions", rf"^Imported {re.escape(exported[0])}\.$", file=path)
        self.assertEqual(second.api("GET", "/api/queues/shop/orders")["policy"], "cap")
        self.assertEqual(second.api("GET", "/api/users/ann")["tags"], ["management"])
        self.text_of("#policies tbody", "cap")

    def test_a_policy_from_the_ui_applies_to_a_queue(self) -> None:
        self.log_in()
        self.open("/admin")
        self.submit_form("add-policies", "Policy cap saved", vhost="/", name="cap", pattern="^capped$",
                         definition='{"max-length": 2}', **{"apply-to": "queues"})
        self.text_of("#policies tbody", r"cap\s+\^capped\$")
        connection = amqp(self.broker)
        self.addCleanup(connection.close)
        channel = connection.channel()
        channel.queue_declare("capped")
        for number in range(5):
            channel.basic_publish("", "capped", b"%d" % number)
        self.assertEqual(channel.queue_declare("capped", passive=True).method.message_count, 2)
        self.open("/queues/%2F/capped")
        self.text_of("#queue-policy", r"Policy\s+cap")
        self.text_of("#queue-policy", "max-length")
        self.open("/admin")
        self.submit_form("set-vhost-limit", "Limit set", vhost="/", name="max-queues", value="1")
        self.text_of("#vhost-limits tbody", r"/\s+max-queues\s+1")
        self.assertEqual(self.broker.api("GET", "/api/vhost-limits/%2F"), [{"vhost": "/", "value": {"max-queues": 1}}])

    def test_a_bad_definitions_file_shows_the_reason(self) -> None:
        path = os.path.join(self.work, "broken.json")
        with open(path, "w") as broken:
            broken.write("{not json")
        self.log_in()
        self.open("/admin")
        self.submit_form("import-definitions", "not_json|JSON|json", file=path)

    def test_management_user_sees_only_its_vhosts(self) -> None:
        for vhost in ("shop", "lab"):
            add_vhost(self.broker, vhost)
            self.broker.api("PUT", f"/api/queues/{vhost}/{vhost}-queue", {})
        self.broker.api("PUT", "/api/users/clerk", {"password": "pw", "tags": "management"})
        self.broker.api("PUT", "/api/permissions/shop/clerk", ALL)
        self.log_in("clerk", "pw")
        self.text_of("#total-queues .value", "^1$")
        self.text_of("#node", "monitoring tag")
        self.open("/queues")
        self.text_of("#queues tbody", "shop-queue")
        self.assertNotIn("lab-queue", self.element("#queues tbody").text)
        options = [option.text for option in self.browser.find_elements("css selector", "#queues-vhost option")]
        self.assertEqual(options, ["All vhosts", "shop"])
        self.open("/admin")
        self.text_of("#users", "Not administrator user")
        self.text_of("#vhosts tbody", "shop")
        self.assertNotIn("lab", self.element("#vhosts tbody").text)
