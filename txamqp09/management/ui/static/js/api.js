// The management HTTP API as the UI uses it: HTTP basic credentials kept for
// the browser tab, JSON in and out, and the API's error reason on refusals.

const CREDENTIALS_KEY = "txamqp09.credentials";

/** A refusal or fault answered by the API: its HTTP status and reason. */
export class ApiError extends Error {
  constructor(status, error, reason) {
    super(reason || error || `HTTP ${status}`);
    this.status = status;
    this.error = error;
  }
}

/** The Authorization header value for a user name and password. */
function basic(user, password) {
  const bytes = new TextEncoder().encode(`${user}:${password}`);
  return "Basic " + btoa(String.fromCharCode(...bytes));
}

/** The credentials of this tab's session, or null before logging in. */
export function session() {
  const stored = sessionStorage.getItem(CREDENTIALS_KEY);
  return stored ? JSON.parse(stored) : null;
}

/** Forget the session's credentials. */
export function logOut() {
  sessionStorage.removeItem(CREDENTIALS_KEY);
}

/** Try a user name and password; on success keep them and resolve with whoami. */
export async function logIn(user, password) {
  const who = await request("GET", "/api/whoami", undefined, basic(user, password));
  sessionStorage.setItem(CREDENTIALS_KEY, JSON.stringify({ user, authorization: basic(user, password), tags: who.tags }));
  return who;
}

/** A path segment, URL-encoded as the API expects (the vhost "/" is %2F). */
export function seg(name) {
  return encodeURIComponent(name);
}

/** A path under /api/ built from literal parts and names to encode. */
export function path(strings, ...names) {
  return strings.reduce((built, part, i) => built + part + (i < names.length ? seg(names[i]) : ""), "");
}

/** A query string from an object (skipping undefined and empty values). */
export function query(params) {
  const pairs = Object.entries(params || {}).filter(([, v]) => v !== undefined && v !== null && v !== "");
  return pairs.length ? "?" + new URLSearchParams(pairs).toString() : "";
}

/**
 * Send a request; resolves with the parsed JSON answer (null for an empty
 * one), rejects with an ApiError carrying the API's reason.
 */
export async function request(method, url, body, authorization, headers) {
  const auth = authorization || (session() || {}).authorization;
  // credentials "omit": the browser neither adds credentials it remembers
  // nor opens its own log-in dialog for a 401 (the Fetch standard prompts
  // only for requests that include credentials); the form shows the reason.
  const init = { method, headers: { ...(headers || {}) }, cache: "no-store", credentials: "omit" };
  if (auth) init.headers.Authorization = auth;
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  let answer;
  try {
    answer = await fetch(url, init);
  } catch (failure) {
    throw new ApiError(0, "unreachable", `The broker did not answer (${failure.message})`);
  }
  const text = await answer.text();
  let parsed = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch (_) {
      parsed = { error: "bad_answer", reason: text.slice(0, 200) };
    }
  }
  if (!answer.ok) {
    throw new ApiError(answer.status, parsed && parsed.error, parsed && parsed.reason);
  }
  return parsed;
}

/** GET a path with query parameters. */
export function get(url, params) {
  return request("GET", url + query(params));
}
