// Connections and Channels: server-side tables, and a connection's page with
// its client properties, TLS details, channels and a "close" action.

import { get, path, request } from "../api.js";
import { h, fill, count, rate, show, facts, section, form, field } from "../dom.js";
import { ServerTable } from "../table.js";

/** A link to a connection's page. */
function connectionLink(name) {
  return h("a", { href: `#/connections/${encodeURIComponent(name)}`, class: "connection-link" }, name);
}

/** A state, coloured when it is not "running". */
function state(value) {
  return h("span", { class: `state-${value}` }, value || "");
}

/** "TLS" (with its version when the API knows it) or "", for a connection. */
function tls(connection) {
  if (!connection.ssl) return "";
  return connection.ssl_protocol ? `TLS (${connection.ssl_protocol})` : "TLS";
}

/** A channel's mode: confirm and/or transactional. */
function mode(channel) {
  return [channel.confirm ? "C" : "", channel.transactional ? "T" : ""].join("") || "";
}

/** The columns of a channels table. */
const CHANNEL_COLUMNS = [
  { title: "Channel", sort: "name", cell: (c) => h("span", {}, connectionLink((c.connection_details || {}).name || ""), ` (${c.number})`) },
  { title: "User", sort: "user", cell: (c) => c.user },
  { title: "Virtual host", sort: "vhost", cell: (c) => c.vhost },
  { title: "Mode", cell: mode },
  { title: "State", sort: "state", cell: (c) => state(c.state) },
  { title: "Prefetch", sort: "prefetch_count", cell: (c) => count(c.prefetch_count) },
  { title: "Unacked", sort: "messages_unacknowledged", cell: (c) => count(c.messages_unacknowledged) },
  { title: "Consumers", sort: "consumer_count", cell: (c) => count(c.consumer_count) },
  { title: "Publish", sort: "message_stats.publish_details.rate", cell: (c) => rate((c.message_stats || {}).publish_details) },
  { title: "Confirm", cell: (c) => rate((c.message_stats || {}).confirm_details) },
  { title: "Deliver / get", cell: (c) => rate((c.message_stats || {}).deliver_get_details) },
  { title: "Ack", cell: (c) => rate((c.message_stats || {}).ack_details) },
];

/** A page holding one server table. */
function tablePage(title, table) {
  return { element: h("div", {}, h("h1", {}, title), table.element), refresh: () => table.refresh() };
}

/** The Connections page. */
export function connectionsPage() {
  return tablePage("Connections", new ServerTable({
    id: "connections",
    endpoint: "/api/connections",
    sort: "name",
    columns: [
      { title: "Name", sort: "name", cell: (c) => connectionLink(c.name) },
      { title: "Client", cell: (c) => (c.client_properties || {}).connection_name || (c.client_properties || {}).product || "" },
      { title: "User", sort: "user", cell: (c) => c.user },
      { title: "Virtual host", sort: "vhost", cell: (c) => c.vhost },
      { title: "State", sort: "state", cell: (c) => state(c.state) },
      { title: "Protocol", sort: "protocol", cell: (c) => c.protocol },
      { title: "TLS", sort: "ssl", cell: tls },
      { title: "Channels", sort: "channels", cell: (c) => count(c.channels) },
      { title: "From client", sort: "recv_oct_details.rate", cell: (c) => rate(c.recv_oct_details, " B") },
      { title: "To client", sort: "send_oct_details.rate", cell: (c) => rate(c.send_oct_details, " B") },
    ],
  }));
}

/** The Channels page. */
export function channelsPage() {
  return tablePage("Channels", new ServerTable({ id: "channels", endpoint: "/api/channels", sort: "name", columns: CHANNEL_COLUMNS }));
}

/** The page of the connection called *name*. */
export function connectionPage(name) {
  const details = h("div", { id: "connection-details" });
  const properties = h("div", { id: "client-properties" });
  const security = h("div", { id: "connection-tls" });
  const channels = h("tbody");
  const closed = h("p", { id: "connection-closed", hidden: true }, "This connection is closed.");
  const close = form("close-connection", field("Reason", "reason", { value: "Closed via management plugin" }), "Force close",
    async ({ reason }) => {
      await request("DELETE", path`/api/connections/${name}`, undefined, undefined, { "X-Reason": reason });
      return "Closed.";
    });
  const element = h("div", {}, h("h1", {}, "Connection ", h("span", { class: "object-name" }, name)), closed,
    h("div", { class: "columns" }, section("Overview", details), section("Client properties", properties)),
    section("TLS", security),
    section("Channels", h("table", { class: "list", id: "connection-channels" },
      h("thead", {}, h("tr", {}, CHANNEL_COLUMNS.map((c) => h("th", {}, c.title)))), channels)),
    section("Close this connection", close));
  return {
    element,
    async refresh() {
      let connection;
      try {
        connection = await get(path`/api/connections/${name}`);
      } catch (failure) {
        if (failure.status !== 404) throw failure;
        closed.hidden = false;
        return;
      }
      fill(details, facts([
        ["User", connection.user], ["Virtual host", connection.vhost], ["State", state(connection.state)],
        ["Protocol", connection.protocol], ["Authentication", connection.auth_mechanism],
        ["Peer", `${connection.peer_host}:${connection.peer_port}`], ["Heartbeat", `${connection.timeout} s`],
        ["Frame max", count(connection.frame_max)], ["Channel max", count(connection.channel_max)],
        ["From client", rate(connection.recv_oct_details, " B")], ["To client", rate(connection.send_oct_details, " B")],
      ]));
      fill(properties, facts(Object.entries(connection.client_properties || {}).map(([key, value]) => [key, show(value)])));
      fill(security, connection.ssl
        ? facts([["Protocol", connection.ssl_protocol], ["Key exchange", connection.ssl_key_exchange],
          ["Cipher", connection.ssl_cipher], ["Hash", connection.ssl_hash],
          ["Peer certificate subject", connection.peer_cert_subject], ["Peer certificate issuer", connection.peer_cert_issuer],
          ["Peer certificate validity", connection.peer_cert_validity]])
        : h("p", {}, "Not using TLS."));
      const list = await get(path`/api/connections/${name}/channels`);
      fill(channels, list.map((c) => h("tr", {}, CHANNEL_COLUMNS.map((column) => h("td", {}, column.cell(c))))));
    },
  };
}
