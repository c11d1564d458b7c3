// Exchanges: the server-side list with rates and a form adding an exchange;
// an exchange's page with its bindings, publish and delete.

import { get, path, query, request } from "../api.js";
import { h, fill, rate, show, facts, section, form, field, jsonObject } from "../dom.js";
import { ServerTable } from "../table.js";
import { exchangeBindings, exchangeLink, features, publishForm, stat, vhostField } from "./common.js";

const TYPES = ["direct", "fanout", "topic", "headers"];

/** The flags among an exchange's features, with RabbitMQ's abbreviations. */
const FEATURES = [["durable", "D"], ["auto_delete", "AD"], ["internal", "I"]];

/** The Exchanges page. */
export function exchangesPage() {
  const table = new ServerTable({
    id: "exchanges",
    endpoint: "/api/exchanges",
    perVhost: true,
    sort: "name",
    columns: [
      { title: "Virtual host", sort: "vhost", cell: (e) => e.vhost },
      { title: "Name", sort: "name", cell: (e) => exchangeLink(e.vhost, e.name) },
      { title: "Type", sort: "type", cell: (e) => e.type },
      { title: "Features", cell: (e) => features(e, FEATURES) },
      { title: "Policy", sort: "policy", cell: (e) => e.policy || "" },
      { title: "Rate in", sort: "message_stats.publish_in_details.rate", cell: (e) => rate(stat(e, "publish_in")) },
      { title: "Rate out", sort: "message_stats.publish_out_details.rate", cell: (e) => rate(stat(e, "publish_out")) },
    ],
  });
  const add = form("add-exchange", [
    vhostField(),
    field("Name", "name", { required: true }),
    field("Type", "type", { choices: TYPES, value: "direct" }),
    field("Durable", "durable", { type: "checkbox", value: true }),
    field("Auto delete", "auto_delete", { type: "checkbox" }),
    field("Internal", "internal", { type: "checkbox" }),
    field("Arguments (JSON object)", "arguments", { type: "textarea", placeholder: '{"alternate-exchange": "unrouted"}' }),
  ], "Add exchange", async (values) => {
    await request("PUT", path`/api/exchanges/${values.vhost}/${values.name}`, {
      type: values.type, durable: values.durable, auto_delete: values.auto_delete, internal: values.internal,
      arguments: jsonObject(values.arguments, "Arguments"),
    });
    table.refresh();
    return `Exchange ${values.name} added.`;
  });
  return {
    element: h("div", {}, h("h1", {}, "Exchanges"), table.element, section("Add an exchange", add)),
    refresh: () => table.refresh(),
  };
}

/** The page of exchange *name* ("amq.default" for the default) of *vhost*. */
export function exchangePage(vhost, name) {
  const details = h("div", { id: "exchange-details" });
  const gone = h("p", { id: "exchange-gone", class: "banner error", hidden: true }, "This exchange does not exist (any more).");
  const bindings = exchangeBindings(vhost, name);
  const remove = form("delete-exchange", [field("Only if unused", "if-unused", { type: "checkbox" })], "Delete exchange",
    async (values) => {
      await request("DELETE", path`/api/exchanges/${vhost}/${name}` + query({ "if-unused": values["if-unused"] || undefined }));
      return "Deleted.";
    });
  const element = h("div", {},
    h("h1", {}, "Exchange ", h("span", { class: "object-name" }, name), h("small", {}, ` in virtual host ${vhost}`)), gone,
    section("Details", details),
    bindings.element,
    section("Publish a message", publishForm(vhost, name === "amq.default" ? "" : name, "")),
    section("Delete", remove));
  return {
    element,
    async refresh() {
      let exchange;
      try {
        exchange = await get(path`/api/exchanges/${vhost}/${name}`);
      } catch (failure) {
        if (failure.status !== 404) throw failure;
        gone.hidden = false;
        return;
      }
      gone.hidden = true;
      fill(details, facts([
        ["Type", exchange.type], ["Features", features(exchange, FEATURES)], ["Policy", exchange.policy || "none"],
        ["Arguments", show(exchange.arguments)],
        ["Rate in", rate(stat(exchange, "publish_in"))], ["Rate out", rate(stat(exchange, "publish_out"))],
      ]));
      await bindings.refresh();
    },
  };
}
