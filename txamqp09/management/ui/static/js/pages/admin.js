// Admin: users (tags, permissions), vhosts, policies and operator policies,
// limits, and definitions export (download) and import (upload).

import { get, path, request } from "../api.js";
import { h, fill, show, section, form, field, jsonObject } from "../dom.js";
import { vhostField } from "./common.js";

/**
 * A section listing what *load()* answers in a table of *columns*
 * ([title, cell]) with a Delete button per row calling *remove(row)*, and
 * *forms* below. A refusal of the list is shown in the section.
 */
function listSection(title, id, load, columns, remove, ...forms) {
  const area = h("div", { id });
  const refresh = async () => {
    let rows;
    try {
      rows = await load();
    } catch (failure) {
      fill(area, h("p", { class: "form-message error" }, failure.message));
      return;
    }
    fill(area, h("table", { class: "list" },
      h("thead", {}, h("tr", {}, columns.map(([heading]) => h("th", {}, heading)), remove ? h("th", {}, "") : null)),
      h("tbody", {}, rows.length ? rows.map((row) => h("tr", {},
        columns.map(([, cell]) => h("td", {}, cell(row))),
        remove ? h("td", {}, h("button", { type: "button", class: "delete", onclick: async (event) => {
          try {
            await remove(row);
            refresh();
          } catch (failure) {
            event.target.replaceWith(h("span", { class: "form-message error" }, failure.message));
          }
        } }, "Delete")) : null)) : h("tr", {}, h("td", { colspan: columns.length + 1, class: "empty" }, "None")))));
  };
  return { element: section(title, area, forms), refresh };
}

/** A form whose action changes something and then refreshes *target*. */
function changeForm(name, fields, submit, action, target) {
  return form(name, fields, submit, async (values) => {
    const done = await action(values);
    await target.refresh();
    return done;
  });
}

/** The users section. */
function users() {
  const list = listSection("Users", "users", () => get("/api/users"),
    [["Name", (u) => u.name], ["Tags", (u) => u.tags.join(", ")]],
    (u) => request("DELETE", path`/api/users/${u.name}`));
  list.element.append(changeForm("add-user", [
    field("Username", "name", { required: true }),
    field("Password", "password", { type: "password" }),
    field("Tags (comma separated)", "tags", { placeholder: "administrator, monitoring, policymaker, management" }),
  ], "Add / update user", async (values) => {
    await request("PUT", path`/api/users/${values.name}`, { password: values.password, tags: values.tags });
    return `User ${values.name} saved.`;
  }, list));
  return list;
}

/** The permissions section. */
function permissions() {
  const list = listSection("Permissions", "permissions", () => get("/api/permissions"),
    [["User", (p) => p.user], ["Virtual host", (p) => p.vhost], ["Configure", (p) => p.configure], ["Write", (p) => p.write], ["Read", (p) => p.read]],
    (p) => request("DELETE", path`/api/permissions/${p.vhost}/${p.user}`));
  list.element.append(changeForm("set-permission", [
    field("User", "user", { required: true }), vhostField(),
    field("Configure", "configure", { value: ".*" }), field("Write", "write", { value: ".*" }), field("Read", "read", { value: ".*" }),
  ], "Set permission", async (values) => {
    await request("PUT", path`/api/permissions/${values.vhost}/${values.user}`,
      { configure: values.configure, write: values.write, read: values.read });
    return "Permission set.";
  }, list));
  return list;
}

/** The virtual hosts section. */
function vhosts() {
  const list = listSection("Virtual hosts", "vhosts", () => get("/api/vhosts"),
    [["Name", (v) => v.name], ["Description", (v) => v.description || ""], ["Tags", (v) => (v.tags || []).join(", ")]],
    (v) => request("DELETE", path`/api/vhosts/${v.name}`));
  list.element.append(changeForm("add-vhost", [
    field("Name", "name", { required: true }), field("Description", "description"), field("Tags (comma separated)", "tags"),
  ], "Add virtual host", async (values) => {
    await request("PUT", path`/api/vhosts/${values.name}`, { description: values.description, tags: values.tags });
    return `Virtual host ${values.name} added.`;
  }, list));
  return list;
}

/** The policies or operator policies section (*kind*: "policies" or "operator-policies"). */
function policies(kind, title) {
  const list = listSection(title, kind, () => get(`/api/${kind}`),
    [["Virtual host", (p) => p.vhost], ["Name", (p) => p.name], ["Pattern", (p) => p.pattern], ["Apply to", (p) => p["apply-to"]],
      ["Definition", (p) => show(p.definition)], ["Priority", (p) => p.priority]],
    (p) => request("DELETE", `/api/${kind}` + path`/${p.vhost}/${p.name}`));
  list.element.append(changeForm(`add-${kind}`, [
    vhostField(), field("Name", "name", { required: true }), field("Pattern", "pattern", { required: true }),
    field("Apply to", "apply-to", { choices: ["all", "queues", "exchanges"], value: "queues" }),
    field("Priority", "priority", { type: "number", value: "0" }),
    field("Definition (JSON object)", "definition", { type: "textarea", placeholder: '{"max-length": 1000}' }),
  ], "Add / update policy", async (values) => {
    await request("PUT", `/api/${kind}` + path`/${values.vhost}/${values.name}`, {
      pattern: values.pattern, "apply-to": values["apply-to"], priority: Number(values.priority),
      definition: jsonObject(values.definition, "Definition"),
    });
    return `Policy ${values.name} saved.`;
  }, list));
  return list;
}

/** The limits of vhosts or users (*kind*: "vhost" or "user"). */
function limits(kind, title, choices) {
  const rows = async () => (await get(`/api/${kind}-limits`)).flatMap((entry) =>
    Object.entries(entry.value || {}).map(([name, value]) => ({ owner: entry[kind], name, value })));
  const list = listSection(title, `${kind}-limits`, rows,
    [[kind === "vhost" ? "Virtual host" : "User", (l) => l.owner], ["Limit", (l) => l.name], ["Value", (l) => show(l.value)]],
    (l) => request("DELETE", `/api/${kind}-limits` + path`/${l.owner}/${l.name}`));
  list.element.append(changeForm(`set-${kind}-limit`, [
    kind === "vhost" ? vhostField() : field("User", "user", { required: true }),
    field("Limit", "name", { choices, value: choices[0] }), field("Value", "value", { type: "number", required: true }),
  ], "Set limit", async (values) => {
    await request("PUT", `/api/${kind}-limits` + path`/${values[kind]}/${values.name}`, { value: Number(values.value) });
    return "Limit set.";
  }, list));
  return list;
}

/** Save *text* as a file called *name* through the browser's downloads. */
function download(name, text) {
  const url = URL.createObjectURL(new Blob([text], { type: "application/json" }));
  const link = h("a", { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

/** The definitions section: export to a file, import from one. */
function definitions() {
  const exporter = form("export-definitions", [], "Download broker definitions", async () => {
    const exported = await get("/api/definitions");
    const name = `txamqp09-definitions-${new Date().toISOString().slice(0, 10)}.json`;
    download(name, JSON.stringify(exported, null, 2));
    return `Saved as ${name}.`;
  });
  const importer = form("import-definitions", [field("Definitions file (JSON)", "file", { type: "file", required: true })],
    "Upload broker definitions", async (values) => {
      if (!values.file) throw new Error("Choose a definitions file first.");
      await request("POST", "/api/definitions", await values.file.text());
      return `Imported ${values.file.name}.`;
    });
  return { element: section("Definitions", h("h3", {}, "Export"), exporter, h("h3", {}, "Import"), importer), refresh: async () => {} };
}

/** The Admin page. */
export function adminPage() {
  const parts = [
    users(), permissions(), vhosts(),
    policies("policies", "Policies"), policies("operator-policies", "Operator policies"),
    limits("vhost", "Virtual host limits", ["max-connections", "max-queues"]),
    limits("user", "User limits", ["max-connections", "max-channels"]),
    definitions(),
  ];
  return {
    element: h("div", {}, h("h1", {}, "Admin"), parts.map((part) => part.element)),
    refresh: () => Promise.all(parts.map((part) => part.refresh())),
  };
}
