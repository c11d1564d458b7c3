// Small DOM helpers: element building, number formatting, forms that show
// the API's error reason.

/**
 * An element: h("a", {href: "#/"}, "text", child). Attributes starting with
 * "on" are event listeners; "dataset" sets data-* attributes; false, null
 * and undefined children are skipped.
 */
export function h(tag, attributes, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(element.dataset, value);
    else if (name in element && typeof value !== "string") element[name] = value;
    else element.setAttribute(name, value === true ? "" : value);
  }
  append(element, children);
  return element;
}

/** Append children (strings, numbers, nodes, nested arrays) to *element*. */
export function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** Replace the children of *element*. */
export function fill(element, ...children) {
  element.replaceChildren();
  return append(element, children);
}

const BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

/** A byte count for a person: 1.5 MiB. */
export function bytes(count) {
  if (count === undefined || count === null) return "?";
  let value = Number(count);
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit ? value.toFixed(1) : value} ${BYTE_UNITS[unit]}`;
}

/** A rate in messages (or bytes, with *unit*) per second. */
export function rate(details, unit) {
  const value = details && typeof details.rate === "number" ? details.rate : 0;
  return `${value >= 100 ? value.toFixed(0) : value.toFixed(1)}${unit || ""}/s`;
}

/** A count with thousands separators, "?" when missing. */
export function count(value) {
  return value === undefined || value === null ? "?" : Number(value).toLocaleString("en");
}

/** A duration given in milliseconds: 3d 4h, 5m 12s. */
export function duration(milliseconds) {
  let seconds = Math.floor(Number(milliseconds || 0) / 1000);
  const parts = [[86400, "d"], [3600, "h"], [60, "m"], [1, "s"]].map(([size, unit]) => {
    const amount = Math.floor(seconds / size);
    seconds -= amount * size;
    return [amount, unit];
  });
  const first = parts.findIndex(([amount]) => amount > 0);
  return first < 0 ? "0s" : parts.slice(first, first + 2).map(([a, u]) => `${a}${u}`).join(" ");
}

/** A JSON value for a table cell. */
export function show(value) {
  if (value === undefined || value === null) return "";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** A definition list (name: value rows) from pairs. */
export function facts(pairs) {
  return h("table", { class: "facts" },
    pairs.map(([name, value]) => h("tr", {}, h("th", {}, name), h("td", {}, value instanceof Node ? value : show(value)))));
}

/** A <section> with a heading. */
export function section(title, ...children) {
  return h("section", {}, h("h2", {}, title), children);
}

/**
 * A form whose submit runs *action(values)* (values by field name); the
 * API's reason for a refusal is shown in the form, *done* text on success.
 */
export function form(name, fields, submitText, action) {
  const message = h("p", { class: "form-message", role: "status" });
  const element = h("form", { class: "api-form", name },
    fields, h("button", { type: "submit" }, submitText), message);
  element.addEventListener("submit", async (event) => {
    event.preventDefault();
    message.className = "form-message";
    message.textContent = "";
    const values = {};
    for (const input of element.elements) {
      if (!input.name) continue;
      values[input.name] = input.type === "checkbox" ? input.checked : input.type === "file" ? input.files[0] : input.value;
    }
    try {
      const done = await action(values, element);
      message.className = "form-message ok";
      message.textContent = done || "Done.";
    } catch (failure) {
      message.className = "form-message error";
      message.textContent = failure.message;
    }
  });
  return element;
}

/** A labelled input for a form. */
export function field(label, name, options) {
  const { type = "text", value, choices, required, placeholder } = options || {};
  let input;
  if (choices) {
    input = h("select", { name }, choices.map((c) => h("option", { value: c, selected: c === value }, c)));
  } else if (type === "textarea") {
    input = h("textarea", { name, placeholder, rows: 3 }, value || "");
  } else {
    input = h("input", { name, type, placeholder, required, value: type === "checkbox" ? undefined : value, checked: type === "checkbox" ? Boolean(value) : undefined });
  }
  return h("label", {}, h("span", {}, label), input);
}

/** Parse a JSON object typed in a form ("" is {}), with a clear error. */
export function jsonObject(text, what) {
  if (!text || !text.trim()) return {};
  let value;
  try {
    value = JSON.parse(text);
  } catch (failure) {
    throw new Error(`${what} is not JSON: ${failure.message}`);
  }
  if (typeof value !== "object" || Array.isArray(value) || value === null) throw new Error(`${what} must be a JSON object`);
  return value;
}
