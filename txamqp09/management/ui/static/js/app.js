// The UI's shell: log-in, navigation between pages (by the URL's #fragment)
// and polling the API to refresh the page shown.

import { logIn, logOut, session } from "./api.js";
import { h, fill } from "./dom.js";
import { overviewPage } from "./pages/overview.js";
import { connectionsPage, connectionPage, channelsPage } from "./pages/connections.js";
import { exchangesPage, exchangePage } from "./pages/exchanges.js";
import { queuesPage, queuePage } from "./pages/queues.js";
import { adminPage } from "./pages/admin.js";
import { showStandbyNotice } from "./pages/group.js";

const REFRESH_KEY = "txamqp09.refresh";

/** #fragment patterns -> [navigation tab, page factory taking the decoded groups]. */
const ROUTES = [
  [/^\/?$/, "overview", overviewPage],
  [/^\/connections$/, "connections", connectionsPage],
  [/^\/connections\/([^/]+)$/, "connections", connectionPage],
  [/^\/channels$/, "channels", channelsPage],
  [/^\/exchanges$/, "exchanges", exchangesPage],
  [/^\/exchanges\/([^/]+)\/([^/]*)$/, "exchanges", exchangePage],
  [/^\/queues$/, "queues", queuesPage],
  [/^\/queues\/([^/]+)\/([^/]+)$/, "queues", queuePage],
  [/^\/admin$/, "admin", adminPage],
];

let current = null;
let timer = null;

/** Seconds between two refreshes (0: never), as chosen in the header. */
function refreshSeconds() {
  const stored = localStorage.getItem(REFRESH_KEY);
  return stored === null ? 5 : Number(stored);
}

/** Show the log-in form, or the application for a logged-in session. */
function showScreen() {
  const credentials = session();
  document.getElementById("login-screen").hidden = Boolean(credentials);
  document.getElementById("app-screen").hidden = !credentials;
  if (credentials) {
    document.getElementById("current-user").textContent = credentials.user;
    route();
  } else {
    stopPage();
    document.getElementById("login-user").focus();
    showStandbyNotice(document.getElementById("standby-notice"));
  }
}

/** Stop refreshing the current page and free it. */
function stopPage() {
  clearInterval(timer);
  timer = null;
  if (current && current.destroy) current.destroy();
  current = null;
}

/** Show the page the #fragment names. */
function route() {
  stopPage();
  delete document.body.dataset.shown;
  const fragment = location.hash.replace(/^#/, "") || "/";
  const page = document.getElementById("page");
  const found = ROUTES.map(([pattern, tab, factory]) => [fragment.match(pattern), tab, factory]).find(([match]) => match);
  for (const link of document.querySelectorAll("header nav a")) {
    link.classList.toggle("active", Boolean(found) && link.dataset.page === found[1]);
  }
  if (!found) {
    fill(page, h("h1", {}, "Not found"), h("p", {}, "No page here. ", h("a", { href: "#/" }, "Overview")));
    return;
  }
  const [match, , factory] = found;
  const shown = current = factory(...match.slice(1).map(decodeURIComponent));
  fill(page, current.element);
  refresh().then(() => {
    // Marks the page as filled in with its first answers (tests wait on
    // it), unless another page replaced it while they were under way.
    if (current === shown) document.body.dataset.shown = fragment;
  });
  const seconds = refreshSeconds();
  if (seconds > 0) timer = setInterval(refresh, seconds * 1000);
}

/** Refresh the current page from the API; a 401 ends the session. */
async function refresh() {
  const page = current;
  const banner = document.getElementById("poll-error");
  if (!page) return;
  try {
    await page.refresh();
    banner.hidden = true;
  } catch (failure) {
    if (page !== current) return;
    if (failure.status === 401 && failure.error === "not_authorized") {
      logOut();
      showScreen();
      return;
    }
    banner.textContent = `Could not refresh: ${failure.message}`;
    banner.hidden = false;
  }
}

/** Wire the log-in form, the header and navigation. */
function start() {
  const form = document.getElementById("login-form");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const error = document.getElementById("login-error");
    error.textContent = "";
    try {
      await logIn(document.getElementById("login-user").value, document.getElementById("login-password").value);
      form.reset();
      showScreen();
    } catch (failure) {
      error.textContent = failure.message;
    }
  });
  document.getElementById("logout").addEventListener("click", () => {
    logOut();
    showScreen();
  });
  const interval = document.getElementById("refresh-interval");
  interval.value = String(refreshSeconds());
  interval.addEventListener("change", () => {
    localStorage.setItem(REFRESH_KEY, interval.value);
    route();
  });
  window.addEventListener("hashchange", () => session() && route());
  showScreen();
}

start();
