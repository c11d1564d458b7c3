// Pieces the exchange and queue pages share: links, features and rates,
// the vhost picker, the publish form and the bindings section.

import { get, path, request } from "../api.js";
import { h, fill, show, section, form, field, jsonObject } from "../dom.js";

/** The name the API uses in paths for an exchange ("" is amq.default). */
export function exchangePathName(name) {
  return name === "" ? "amq.default" : name;
}

/** A link to an exchange's page. */
export function exchangeLink(vhost, name) {
  return h("a", { href: `#/exchanges/${encodeURIComponent(vhost)}/${encodeURIComponent(exchangePathName(name))}`, class: "exchange-link" },
    name === "" ? "(AMQP default)" : name);
}

/** A link to a queue's page. */
export function queueLink(vhost, name) {
  return h("a", { href: `#/queues/${encodeURIComponent(vhost)}/${encodeURIComponent(name)}`, class: "queue-link" }, name);
}

/**
 * The features of an exchange or queue as RabbitMQ abbreviates them: the
 * abbreviation of each of *flags* ([field, abbreviation] pairs) that is
 * true, then the names of its arguments without "x-".
 */
export function features(entity, flags) {
  return [...flags.map(([key, abbreviation]) => (entity[key] ? abbreviation : "")),
    ...Object.keys(entity.arguments || {}).map((key) => key.replace(/^x-/, ""))].filter(Boolean).join(" ");
}

/** The rate details of the message statistic *key* of an exchange or queue. */
export const stat = (entity, key) => (entity.message_stats || {})[`${key}_details`];

/** A form field choosing one of the vhosts the user may see. */
export function vhostField() {
  const select = h("select", { name: "vhost" });
  get("/api/vhosts", { columns: "name" }).then((vhosts) =>
    fill(select, vhosts.map((v) => h("option", { value: v.name }, v.name))));
  return h("label", {}, h("span", {}, "Virtual host"), select);
}

/** Message properties typed in a publish form. */
function properties(values) {
  const props = jsonObject(values.properties, "Properties");
  const headers = jsonObject(values.headers, "Headers");
  if (Object.keys(headers).length) props.headers = headers;
  if (values.delivery_mode) props.delivery_mode = Number(values.delivery_mode);
  return props;
}

/**
 * A form publishing to *exchange* of *vhost*; *routingKey* fills in the
 * routing key (a queue's name for the default exchange).
 */
export function publishForm(vhost, exchange, routingKey) {
  return form("publish", [
    field("Routing key", "routing_key", { value: routingKey }),
    field("Delivery mode", "delivery_mode", { choices: ["1", "2"], value: "1" }),
    field("Headers (JSON object)", "headers", { type: "textarea", placeholder: '{"x-kind": "test"}' }),
    field("Properties (JSON object)", "properties", { type: "textarea", placeholder: '{"content_type": "text/plain"}' }),
    field("Payload", "payload", { type: "textarea" }),
    field("Payload encoding", "payload_encoding", { choices: ["string", "base64"], value: "string" }),
  ], "Publish message", async (values) => {
    const answer = await request("POST", path`/api/exchanges/${vhost}/${exchangePathName(exchange)}/publish`, {
      routing_key: values.routing_key, payload: values.payload, payload_encoding: values.payload_encoding,
      properties: properties(values),
    });
    return answer.routed ? "Message published." : "Message published, but not routed to any queue.";
  });
}

/** The path of one binding, for DELETE. */
function bindingPath(binding) {
  const kind = binding.destination_type === "queue" ? "q" : "e";
  return path`/api/bindings/${binding.vhost}/e/${binding.source}/` + kind + path`/${binding.destination}/${binding.properties_key}`;
}

/** A bindings table with an Unbind button per row (none for the default exchange's). */
function bindingsTable(id, bindings, columns) {
  return h("table", { class: "list", id },
    h("thead", {}, h("tr", {}, columns.map(([title]) => h("th", {}, title)), h("th", {}, ""))),
    h("tbody", {}, bindings.length ? bindings.map((b) => h("tr", {},
      columns.map(([, cell]) => h("td", {}, cell(b))),
      h("td", {}, b.source === "" ? "" : h("button", { type: "button", class: "unbind",
        onclick: async (event) => {
          try {
            await request("DELETE", bindingPath(b));
            event.target.closest("tr").remove();
          } catch (failure) {
            event.target.replaceWith(h("span", { class: "form-message error" }, failure.message));
          }
        } }, "Unbind")))) : h("tr", {}, h("td", { colspan: columns.length + 1, class: "empty" }, "No bindings"))));
}

const ROUTING = [["Routing key", (b) => b.routing_key], ["Arguments", (b) => show(b.arguments)]];

/** The bindings of a queue, and a form binding it to an exchange. */
export function queueBindings(vhost, queue) {
  const area = h("div");
  const add = form("add-binding", [
    field("From exchange", "source", { required: true }),
    field("Routing key", "routing_key"),
    field("Arguments (JSON object)", "arguments", { type: "textarea" }),
  ], "Bind", async (values) => {
    await request("POST", path`/api/bindings/${vhost}/e/${values.source}/q/${queue}`,
      { routing_key: values.routing_key, arguments: jsonObject(values.arguments, "Arguments") });
    refresh();
    return "Bound.";
  });
  const refresh = async () => {
    const bindings = await get(path`/api/queues/${vhost}/${queue}/bindings`);
    fill(area, bindingsTable("queue-bindings", bindings, [["From", (b) => exchangeLink(vhost, b.source)], ...ROUTING]));
  };
  return { element: section("Bindings", area, add), refresh };
}

/** The bindings from and to an exchange, and a form binding it to a queue or exchange. */
export function exchangeBindings(vhost, exchange) {
  const area = h("div");
  const add = form("add-binding", [
    field("To", "kind", { choices: ["queue", "exchange"], value: "queue" }),
    field("Destination", "destination", { required: true }),
    field("Routing key", "routing_key"),
    field("Arguments (JSON object)", "arguments", { type: "textarea" }),
  ], "Bind", async (values) => {
    await request("POST", path`/api/bindings/${vhost}/e/${exchange}/` + (values.kind === "queue" ? "q" : "e") + path`/${values.destination}`,
      { routing_key: values.routing_key, arguments: jsonObject(values.arguments, "Arguments") });
    refresh();
    return "Bound.";
  });
  const destination = (b) => (b.destination_type === "queue" ? queueLink(vhost, b.destination) : exchangeLink(vhost, b.destination));
  const refresh = async () => {
    const [outgoing, incoming] = await Promise.all([
      get(path`/api/exchanges/${vhost}/${exchange}/bindings/source`),
      get(path`/api/exchanges/${vhost}/${exchange}/bindings/destination`),
    ]);
    fill(area,
      h("h3", {}, "From this exchange"),
      bindingsTable("exchange-bindings", outgoing, [["To", destination], ["Type", (b) => b.destination_type], ...ROUTING]),
      h("h3", {}, "To this exchange"),
      bindingsTable("exchange-incoming-bindings", incoming, [["From", (b) => exchangeLink(vhost, b.source)], ...ROUTING]));
  };
  return { element: section("Bindings", area, add), refresh };
}
