// A broker's group: the Overview's section (members, roles, the lease) and
// the notice a standby's log-in screen shows (a standby answers its
// overview without log-in, and nothing else: the active broker serves).

import { ApiError, request } from "../api.js";
import { h, fill, section } from "../dom.js";

/** A member's role as the group's lease says it (the holder is active). */
function roleOf(member, lease) {
  return lease && !lease.expired && lease.holder === member.node ? "active" : member.role;
}

/** Seconds from now until an ISO 8601 moment (negative once past). */
function secondsUntil(moment) {
  return moment ? (Date.parse(moment) - Date.now()) / 1000 : null;
}

/** Seconds ago, or "never". */
function ago(moment) {
  const seconds = secondsUntil(moment);
  return seconds === null ? "never" : `${Math.max(0, -seconds).toFixed(1)} s ago`;
}

/** The lease, in words. */
function leaseText(lease) {
  if (!lease || !lease.holder) return "never held";
  const left = secondsUntil(lease.expires);
  if (lease.expired || left <= 0) return `free (last held by ${lease.holder}, epoch ${lease.epoch})`;
  return `held by ${lease.holder}, epoch ${lease.epoch}, expires in ${left.toFixed(1)} s`;
}

/** The management UI of a member, from its listeners ("" without one). */
function managementUrl(member) {
  const http = (member.addresses || []).find((address) => address.protocol === "http");
  return http ? `http://${http.host.includes(":") ? `[${http.host}]` : http.host}:${http.port}/` : "";
}

/** The members' table: name, role, AMQP listeners, last seen, store round trip. */
function membersTable(group) {
  const rows = (group.members || []).map((member) => {
    const role = roleOf(member, group.lease);
    const amqp = (member.addresses || []).filter((address) => address.protocol.startsWith("amqp"))
      .map((address) => `${address.host}:${address.port}`).join(", ");
    return h("tr", { id: `member-${member.node}`, class: `role-${role}` },
      h("td", {}, member.node + (member.node === group.node ? " (this broker)" : "")),
      h("td", { class: "role" }, role),
      h("td", {}, amqp || "-"),
      h("td", {}, ago(member.last_seen)),
      h("td", {}, member.round_trip === null || member.round_trip === undefined ? "-" : `${(member.round_trip * 1000).toFixed(1)} ms`));
  });
  return h("table", { class: "list", id: "group-members" },
    h("thead", {}, h("tr", {}, ...["Member", "Role", "AMQP", "Last seen", "Store round trip"].map((title) => h("th", {}, title)))),
    h("tbody", {}, ...rows));
}

/** The Overview's Group section, filled in by update(overview). */
export class GroupSection {
  constructor() {
    this.body = h("div", { id: "group" });
    this.element = section("Group", this.body);
    this.element.hidden = true;
  }

  /** Show the group *overview* names (hidden for a broker alone). */
  update(overview) {
    const group = overview.group;
    this.element.hidden = !group;
    if (!group) return;
    fill(this.body,
      h("p", {}, "This broker: ", h("strong", { id: "group-role", class: `role-${group.role}` }, group.role),
        ". Lease: ", h("span", { id: "group-lease" }, leaseText(group.lease)), "."),
      membersTable(group));
  }
}

/**
 * On the log-in screen: if this broker is a member of a group that does
 * not serve (its overview answers without credentials), say so and link to
 * the active broker's management UI.
 */
export async function showStandbyNotice(area) {
  let overview;
  try {
    overview = await request("GET", "/api/overview");
  } catch (failure) {
    if (failure instanceof ApiError) return;
    throw failure;
  }
  const group = overview && overview.group;
  if (!group || group.role === "active") return;
  const active = (group.members || []).find((member) => roleOf(member, group.lease) === "active");
  const url = active ? managementUrl(active) : "";
  fill(area,
    h("p", {}, `This broker (${group.node}) is a ${group.role} member of its group: it serves no messages and no management pages.`),
    active
      ? h("p", {}, `The active broker is ${active.node}`, url ? h("span", {}, ": ", h("a", { id: "active-ui", href: url }, url)) : "", ".")
      : h("p", {}, "No broker of the group is active at the moment."));
  area.hidden = false;
}
