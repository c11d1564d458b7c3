// Tables of API lists, sorted, filtered and paginated by the server (the
// API's sort, sort_reverse, page, page_size, name and use_regex
// parameters), so that a list of 10,000 queues puts one page in the DOM.

import { get, seg } from "./api.js";
import { h, fill, count } from "./dom.js";

const PAGE_SIZES = [20, 50, 100, 500];

/**
 * A server-side paginated table.
 *
 * @param {object} spec
 *   id: the table's id (its elements get ids from it, for tests and links);
 *   endpoint: the list's path ("/api/queues"); with perVhost it becomes
 *     "/api/queues/{vhost}" when a vhost is chosen;
 *   columns: [{title, sort (the API's field to sort by, optional), cell(item)}];
 *   sort: the initial sort field.
 */
export class ServerTable {
  constructor(spec) {
    this.spec = spec;
    this.state = { page: 1, page_size: 20, name: "", use_regex: false, sort: spec.sort || "", sort_reverse: false, vhost: "" };
    this.body = h("tbody");
    this.summary = h("span", { class: "summary", id: `${spec.id}-summary` });
    this.pages = h("span", { class: "pages" });
    this.element = h("div", { class: "server-table", id: spec.id },
      this.controls(),
      h("table", { class: "list" }, h("thead", {}, h("tr", {}, spec.columns.map((column) => this.header(column)))), this.body),
      h("div", { class: "pager" }, this.summary, this.pages));
  }

  /** The filter, regex, vhost and page-size controls. */
  controls() {
    const filter = h("input", { type: "search", placeholder: "Filter by name", id: `${this.spec.id}-filter`,
      oninput: () => this.change({ name: filter.value, page: 1 }) });
    const regex = h("input", { type: "checkbox", id: `${this.spec.id}-regex`,
      onchange: () => this.change({ use_regex: regex.checked, page: 1 }) });
    const size = h("select", { id: `${this.spec.id}-page-size`, onchange: () => this.change({ page_size: Number(size.value), page: 1 }) },
      PAGE_SIZES.map((n) => h("option", { value: n, selected: n === this.state.page_size }, n)));
    this.vhosts = h("select", { id: `${this.spec.id}-vhost`, onchange: () => this.change({ vhost: this.vhosts.value, page: 1 }) },
      h("option", { value: "" }, "All vhosts"));
    return h("div", { class: "table-controls" },
      filter, h("label", {}, regex, " Regex"),
      this.spec.perVhost ? h("label", {}, "Virtual host ", this.vhosts) : null,
      h("label", {}, "Page size ", size));
  }

  /** A column header, a sort button when the column sorts. */
  header(column) {
    if (!column.sort) return h("th", {}, column.title);
    return h("th", {}, h("button", { type: "button", class: "sort", dataset: { sort: column.sort },
      onclick: () => this.change({ sort: column.sort, sort_reverse: this.state.sort === column.sort ? !this.state.sort_reverse : false, page: 1 }) },
      column.title));
  }

  /** Change the query and fetch again. */
  change(changes) {
    Object.assign(this.state, changes);
    this.refresh();
  }

  /** Fetch the current page and show it. */
  async refresh() {
    const { vhost, ...params } = this.state;
    if (!params.name) delete params.name;
    if (!params.sort) delete params.sort;
    const url = this.spec.perVhost && vhost ? `${this.spec.endpoint}/${seg(vhost)}` : this.spec.endpoint;
    const asked = JSON.stringify(this.state);
    let answer;
    try {
      answer = await get(url, params);
    } catch (failure) {
      // The list shrank below the page shown: start again at its first page.
      if (failure.error !== "page_out_of_range" || this.state.page === 1) throw failure;
      this.state.page = 1;
      return this.refresh();
    }
    if (JSON.stringify(this.state) !== asked) return;
    if (this.spec.perVhost) this.showVhosts();
    this.show(answer);
  }

  /** Offer the vhosts the user may see in the vhost filter. */
  async showVhosts() {
    const names = (await get("/api/vhosts", { columns: "name" })).map((v) => v.name);
    const shown = Array.from(this.vhosts.options).slice(1).map((o) => o.value);
    if (JSON.stringify(shown) === JSON.stringify(names)) return;
    fill(this.vhosts, h("option", { value: "" }, "All vhosts"),
      names.map((name) => h("option", { value: name, selected: name === this.state.vhost }, name)));
  }

  /** Show one page of the API's paginated answer. */
  show(answer) {
    const columns = this.spec.columns;
    fill(this.body, answer.items.length
      ? answer.items.map((item) => h("tr", {}, columns.map((column) => h("td", {}, column.cell(item)))))
      : h("tr", {}, h("td", { colspan: columns.length, class: "empty" }, "Nothing to show")));
    for (const button of this.element.querySelectorAll("button.sort")) {
      const active = button.dataset.sort === this.state.sort;
      button.className = "sort" + (active ? (this.state.sort_reverse ? " descending" : " ascending") : "");
    }
    fill(this.summary, `${count(answer.item_count)} of ${count(answer.filtered_count)} matching (${count(answer.total_count)} in all)`);
    const pages = Math.max(answer.page_count, 1);
    const go = (page) => () => this.change({ page });
    fill(this.pages,
      h("button", { type: "button", disabled: answer.page <= 1, onclick: go(answer.page - 1), id: `${this.spec.id}-previous` }, "‹ Previous"),
      ` Page ${answer.page} of ${pages} `,
      h("button", { type: "button", disabled: answer.page >= pages, onclick: go(answer.page + 1), id: `${this.spec.id}-next` }, "Next ›"));
  }
}
