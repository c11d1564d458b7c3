// Queues: the server-side list with depths and rates and a form adding a
// queue; a queue's page with charts, consumers, bindings, the effective
// policy and the get / publish / purge / delete actions.

import { get, path, query, request } from "../api.js";
import { h, fill, count, rate, bytes, show, facts, section, form, field, jsonObject } from "../dom.js";
import { ServerTable } from "../table.js";
import { RANGES, SampleChart, historyParams, rangeSelect } from "../charts.js";
import { features, publishForm, queueBindings, queueLink, stat, vhostField } from "./common.js";

/** The flags among a queue's features, with RabbitMQ's abbreviations. */
const FEATURES = [["durable", "D"], ["auto_delete", "AD"], ["exclusive", "Excl"]];

/** The Queues page. */
export function queuesPage() {
  const table = new ServerTable({
    id: "queues",
    endpoint: "/api/queues",
    perVhost: true,
    sort: "name",
    columns: [
      { title: "Virtual host", sort: "vhost", cell: (q) => q.vhost },
      { title: "Name", sort: "name", cell: (q) => queueLink(q.vhost, q.name) },
      { title: "Type", sort: "type", cell: (q) => q.type },
      { title: "Features", cell: (q) => features(q, FEATURES) },
      { title: "Policy", sort: "policy", cell: (q) => q.policy || "" },
      { title: "State", sort: "state", cell: (q) => q.state },
      { title: "Ready", sort: "messages_ready", cell: (q) => count(q.messages_ready) },
      { title: "Unacked", sort: "messages_unacknowledged", cell: (q) => count(q.messages_unacknowledged) },
      { title: "Total", sort: "messages", cell: (q) => count(q.messages) },
      { title: "Consumers", sort: "consumers", cell: (q) => count(q.consumers) },
      { title: "Incoming", sort: "message_stats.publish_details.rate", cell: (q) => rate(stat(q, "publish")) },
      { title: "Deliver / get", sort: "message_stats.deliver_get_details.rate", cell: (q) => rate(stat(q, "deliver_get")) },
      { title: "Ack", sort: "message_stats.ack_details.rate", cell: (q) => rate(stat(q, "ack")) },
    ],
  });
  const add = form("add-queue", [
    vhostField(),
    field("Name", "name", { required: true }),
    field("Type", "type", { choices: ["classic", "quorum", "stream"], value: "classic" }),
    field("Durable", "durable", { type: "checkbox", value: true }),
    field("Auto delete", "auto_delete", { type: "checkbox" }),
    field("Arguments (JSON object)", "arguments", { type: "textarea", placeholder: '{"x-max-length": 1000}' }),
  ], "Add queue", async (values) => {
    const args = jsonObject(values.arguments, "Arguments");
    if (values.type !== "classic") args["x-queue-type"] = values.type;
    await request("PUT", path`/api/queues/${values.vhost}/${values.name}`,
      { durable: values.durable, auto_delete: values.auto_delete, arguments: args });
    table.refresh();
    return `Queue ${values.name} added.`;
  });
  return {
    element: h("div", {}, h("h1", {}, "Queues"), table.element, section("Add a queue", add)),
    refresh: () => table.refresh(),
  };
}

/** The messages a get answered, each with its properties and payload. */
function messages(list) {
  if (!list.length) return h("p", { class: "empty" }, "Queue is empty.");
  return list.map((message, i) => h("div", { class: "message" },
    h("h3", {}, `Message ${i + 1}`),
    facts([
      ["Exchange", message.exchange === "" ? "(AMQP default)" : message.exchange],
      ["Routing key", message.routing_key], ["Redelivered", String(message.redelivered)],
      ["Messages left", count(message.message_count)], ["Properties", show(message.properties)],
      ["Payload", h("span", {}, `${bytes(message.payload_bytes)}, encoding: ${message.payload_encoding}`)],
    ]),
    h("pre", { class: "payload" }, message.payload)));
}

/** The page of queue *name* of *vhost*. */
export function queuePage(vhost, name) {
  let range = RANGES[0];
  const details = h("div", { id: "queue-details" });
  const policy = h("div", { id: "queue-policy" });
  const consumers = h("div", { id: "queue-consumers" });
  const gone = h("p", { id: "queue-gone", class: "banner error", hidden: true }, "This queue does not exist (any more).");
  const queuedChart = new SampleChart("chart-queue-queued", "Queued messages",
    [{ label: "Ready", key: "messages_ready" }, { label: "Unacked", key: "messages_unacknowledged" }]);
  const rateChart = new SampleChart("chart-queue-rates", "Message rates", [
    { label: "Publish", key: "publish", rate: true }, { label: "Deliver / get", key: "deliver_get", rate: true },
    { label: "Ack", key: "ack", rate: true }, { label: "Redeliver", key: "redeliver", rate: true }]);
  const bindings = queueBindings(vhost, name);
  const got = h("div", { id: "got-messages" });
  const getForm = form("get-messages", [
    field("Ack mode", "ackmode", { choices: ["ack_requeue_true", "ack_requeue_false", "reject_requeue_true", "reject_requeue_false"], value: "ack_requeue_true" }),
    field("Encoding", "encoding", { choices: ["auto", "base64"], value: "auto" }),
    field("Messages", "count", { type: "number", value: "1" }),
    field("Truncate (bytes)", "truncate", { type: "number", value: "50000" }),
  ], "Get messages", async (values) => {
    const list = await request("POST", path`/api/queues/${vhost}/${name}/get`, {
      count: Number(values.count), ackmode: values.ackmode, encoding: values.encoding,
      truncate: values.truncate ? Number(values.truncate) : undefined,
    });
    fill(got, messages(list));
    return `${list.length} message(s).`;
  });
  const purge = form("purge", [], "Purge messages", async () => {
    await request("DELETE", path`/api/queues/${vhost}/${name}/contents`);
    return "Purged.";
  });
  const remove = form("delete-queue", [
    field("Only if empty", "if-empty", { type: "checkbox" }),
    field("Only if unused", "if-unused", { type: "checkbox" }),
  ], "Delete queue", async (values) => {
    const conditions = { "if-empty": values["if-empty"] || undefined, "if-unused": values["if-unused"] || undefined };
    await request("DELETE", path`/api/queues/${vhost}/${name}` + query(conditions));
    return "Deleted.";
  });
  const element = h("div", {},
    h("h1", {}, "Queue ", h("span", { class: "object-name" }, name), h("small", {}, ` in virtual host ${vhost}`)), gone,
    h("p", {}, "Charts: ", rangeSelect("chart-range", range, (chosen) => { range = chosen; page.refresh(); })),
    h("div", { class: "charts" }, queuedChart.element, rateChart.element),
    h("div", { class: "columns" }, section("Details", details), section("Policy", policy)),
    section("Consumers", consumers),
    bindings.element,
    section("Publish a message", h("p", {}, "Published to the default exchange with this queue's name as routing key."),
      publishForm(vhost, "", name)),
    section("Get messages", h("p", {}, "Getting messages is destructive unless they are requeued."), getForm, got),
    section("Purge", purge),
    section("Delete", remove));

  const page = {
    element,
    async refresh() {
      let queue;
      try {
        queue = await get(path`/api/queues/${vhost}/${name}`, historyParams(range));
      } catch (failure) {
        if (failure.status !== 404) throw failure;
        gone.hidden = false;
        return;
      }
      gone.hidden = true;
      queuedChart.update(queue);
      rateChart.update(queue.message_stats || {});
      fill(details, facts([
        ["Type", queue.type], ["Features", features(queue, FEATURES)], ["State", queue.state],
        ["Ready", count(queue.messages_ready)], ["Unacked", count(queue.messages_unacknowledged)],
        ["Total", count(queue.messages)], ["Bytes", bytes(queue.message_bytes)],
        ["Consumers", count(queue.consumers)], ["Consumer capacity", show(queue.consumer_capacity)],
        ["Arguments", show(queue.arguments)],
      ]));
      fill(policy, facts([
        ["Policy", queue.policy || "none"], ["Operator policy", queue.operator_policy || "none"],
        ["Effective definition", show(queue.effective_policy_definition)],
      ]));
      const list = queue.consumer_details || [];
      fill(consumers, list.length ? h("table", { class: "list" },
        h("thead", {}, h("tr", {}, ["Tag", "Channel", "Ack required", "Exclusive", "Prefetch", "Active", "Arguments"].map((t) => h("th", {}, t)))),
        h("tbody", {}, list.map((c) => h("tr", {},
          h("td", {}, c.consumer_tag),
          h("td", {}, h("a", { href: `#/connections/${encodeURIComponent(c.channel_details.connection_name)}` }, c.channel_details.name)),
          h("td", {}, String(c.ack_required)), h("td", {}, String(c.exclusive)), h("td", {}, count(c.prefetch_count)),
          h("td", {}, String(c.active)), h("td", {}, show(c.arguments)))))) : h("p", { class: "empty" }, "No consumers."));
      await bindings.refresh();
    },
    destroy() {
      queuedChart.destroy();
      rateChart.destroy();
    },
  };
  return page;
}
