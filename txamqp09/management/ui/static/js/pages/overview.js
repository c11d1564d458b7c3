// Overview: alarms, totals, message rates and queued messages over the last
// 1/10/60 minutes, the node's figures, the listeners and the broker's group.

import { get, session } from "../api.js";
import { h, fill, count, rate, bytes, duration, facts, section } from "../dom.js";
import { RANGES, SampleChart, historyParams, rangeSelect } from "../charts.js";
import { GroupSection } from "./group.js";

/** The message rates shown: label and message_stats key. */
export const MESSAGE_RATES = [
  ["Publish", "publish"], ["Confirm", "confirm"], ["Deliver", "deliver"], ["Acknowledge", "ack"],
  ["Redeliver", "redeliver"], ["Get", "get"], ["Return", "return_unroutable"], ["Unroutable (dropped)", "drop_unroutable"],
];
const TOTALS = [["Connections", "connections"], ["Channels", "channels"], ["Exchanges", "exchanges"], ["Queues", "queues"], ["Consumers", "consumers"]];

/** A bar showing *used* of *limit*, red beyond *high* (a fraction). */
function meter(used, limit, high) {
  const fraction = limit ? Math.min(1, used / limit) : 0;
  const bar = h("span", {});
  bar.style.width = `${Math.round(fraction * 100)}%`;
  return h("span", { class: "meter" + (fraction >= high ? " high" : "") }, bar);
}

/** The alarms a node entry reports, as banners. */
function alarms(node) {
  const raised = [];
  if (node.mem_alarm) raised.push(`Memory alarm: ${bytes(node.mem_used)} used, high watermark ${bytes(node.mem_limit)}. Publishers are blocked.`);
  if (node.disk_free_alarm) raised.push(`Disk alarm: ${bytes(node.disk_free)} free, limit ${bytes(node.disk_free_limit)}. Publishers are blocked.`);
  return raised.map((text) => h("div", { class: "alarm", role: "alert" }, text));
}

/** The node's figures. */
function nodeFacts(node) {
  return facts([
    ["Node", node.name],
    ["Memory", h("span", { id: "node-memory" }, meter(node.mem_used, node.mem_limit, 1), `${bytes(node.mem_used)} of high watermark ${bytes(node.mem_limit)}`)],
    ["Disk free", h("span", { id: "node-disk" }, `${bytes(node.disk_free)} (limit ${bytes(node.disk_free_limit)})`)],
    ["File descriptors", h("span", {}, meter(node.fd_used, node.fd_total, 0.9), `${count(node.fd_used)} of ${count(node.fd_total)}`)],
    ["Sockets", h("span", {}, meter(node.sockets_used, node.sockets_total, 0.9), `${count(node.sockets_used)} of ${count(node.sockets_total)}`)],
    ["Uptime", duration(node.uptime)],
    ["Store", h("span", { id: "node-store" }, `${bytes(node.store_bytes)} in ${node.db_dir}`)],
    ["Python", node.python_version],
  ]);
}

/** The Overview page. */
export function overviewPage() {
  let range = RANGES[0];
  const alarmArea = h("div", { id: "alarms" });
  const totals = h("div", { class: "totals", id: "totals" });
  const rateTable = h("tbody");
  const queuedTable = h("tbody");
  const nodeArea = h("div", { id: "node" });
  const listeners = h("tbody");
  const group = new GroupSection();
  const rateChart = new SampleChart("chart-message-rates", "Message rates",
    MESSAGE_RATES.map(([label, key]) => ({ label, key, rate: true })));
  const queuedChart = new SampleChart("chart-queued", "Queued messages",
    [{ label: "Ready", key: "messages_ready" }, { label: "Unacked", key: "messages_unacknowledged" }, { label: "Total", key: "messages" }]);
  const element = h("div", { class: "overview" },
    h("h1", {}, "Overview"), alarmArea, totals,
    h("p", {}, "Charts: ", rangeSelect("chart-range", range, (chosen) => { range = chosen; page.refresh(); })),
    h("div", { class: "charts" }, queuedChart.element, rateChart.element),
    h("div", { class: "columns" },
      section("Queued messages", h("table", { class: "list", id: "queued-messages" }, queuedTable)),
      section("Message rates", h("table", { class: "list", id: "message-rates" }, rateTable))),
    group.element,
    section("Node", nodeArea),
    section("Listeners", h("table", { class: "list", id: "listeners" },
      h("thead", {}, h("tr", {}, h("th", {}, "Protocol"), h("th", {}, "Address"), h("th", {}, "Port"))), listeners)));

  const page = {
    element,
    async refresh() {
      const overview = await get("/api/overview", historyParams(range));
      const stats = overview.message_stats || {};
      const queued = overview.queue_totals || {};
      fill(totals, TOTALS.map(([label, key]) => h("div", { class: "total", id: `total-${key}` },
        h("div", { class: "value" }, count((overview.object_totals || {})[key])), h("div", { class: "label" }, label))));
      fill(rateTable, MESSAGE_RATES.map(([label, key]) => h("tr", { id: `rate-${key}` },
        h("th", {}, label), h("td", { class: "rate" }, rate(stats[`${key}_details`])), h("td", {}, count(stats[key] || 0)))));
      fill(queuedTable, [["Ready", "messages_ready"], ["Unacked", "messages_unacknowledged"], ["Total", "messages"]].map(([label, key]) =>
        h("tr", { id: `queued-${key}` }, h("th", {}, label), h("td", {}, count(queued[key] || 0)))));
      rateChart.update(stats);
      queuedChart.update(queued);
      fill(listeners, (overview.listeners || []).map((l) => h("tr", {}, h("td", {}, l.protocol), h("td", {}, l.ip_address), h("td", {}, l.port))));
      group.update(overview);
      await page.refreshNode(overview.node);
    },
    async refreshNode(name) {
      const tags = (session() || {}).tags || [];
      if (!tags.includes("monitoring") && !tags.includes("administrator")) {
        fill(nodeArea, h("p", {}, "Node figures need the monitoring tag."));
        return;
      }
      const node = (await get("/api/nodes")).find((entry) => entry.name === name);
      fill(alarmArea, alarms(node));
      fill(nodeArea, nodeFacts(node));
    },
    destroy() {
      rateChart.destroy();
      queuedChart.destroy();
    },
  };
  return page;
}
