"""The web UI in a real browser: the broker in a child process with its
management listener, headless Chromium driven by Selenium, and a blocking
API client to set things up and check them.

Everything here blocks (Selenium does); tests using it are
:class:`~twisted.trial.unittest.SynchronousTestCase` and never run the
reactor. They skip when Selenium, Chromium or chromedriver is missing.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Optional

from twisted.trial.unittest import SynchronousTestCase

ROOT = str(Path(__file__).resolve().parents[2])
#: Where Debian's chromium and chromium-driver packages put the two programs.
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
#: Seconds a browser or broker wait may take before the test fails (the
#: overview's charts need two 5-second samples and a 5-second poll).
WAIT = 30
#: The broker's log lines naming its listeners' ports, and the one saying all listen.
_LISTENING = re.compile(r"listening for (amqp|http) on .*port (\d+)")
_READY = "accepting connections on"


def missing_browser() -> Optional[str]:
    """Why browser tests cannot run here, or None when they can."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "needs selenium (pip install '.[test]')"
    for program in (CHROMIUM, CHROMEDRIVER):
        if not os.access(program, os.X_OK):
            return f"needs {program} (Debian packages chromium and chromium-driver)"
    return None


class BrokerChild:
    """``python -m twisted amqp09`` with a management listener, ports chosen by
    the system and read from its log.

    :param data_dir: the broker's data directory.
    :param extra: more command-line options.
    :param ready: the log line that tells the broker started (by default,
        that it accepts connections).
    """

    def __init__(self, data_dir: str, *extra: str, ready: str = _READY) -> None:
        self.data_dir = os.path.abspath(data_dir)
        self.extra = extra
        self.ready = ready
        #: The ports of each kind of listener ("amqp", "http"), in the order they opened.
        self.listeners: dict[str, list[int]] = {}
        self.output: list[str] = []
        self._ready = threading.Condition()
        self._process: Optional[subprocess.Popen[str]] = None
        self._reader: Optional[threading.Thread] = None

    def start(self) -> None:
        """Spawn the broker and return once every listener listens."""
        argv = [
            sys.executable, "-m", "twisted", "--log-format", "text", "amqp09",
            "--listen", "tcp:0:interface=127.0.0.1", "--heartbeat", "0", "--data-dir", self.data_dir,
            "--management", "tcp:0:interface=127.0.0.1", *self.extra,
        ]
        self._process = subprocess.Popen(
            argv, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        self._reader = threading.Thread(target=self._read, args=(self._process,), daemon=True)
        self._reader.start()
        with self._ready:
            started = self._ready.wait_for(self._started, WAIT)
        if not started or not self.running:
            self.stop()
            raise RuntimeError("the broker did not start:\n" + "".join(self.output[-40:]))

    def _started(self) -> bool:
        return not self.running or any(self.ready in line for line in self.output)

    def _read(self, process: subprocess.Popen[str]) -> None:
        """Keep the broker's output (and the ports it names) until it ends."""
        assert process.stdout is not None
        for line in process.stdout:
            with self._ready:
                self.output.append(line)
                found = _LISTENING.search(line)
                if found:
                    self.listeners.setdefault(found.group(1), []).append(int(found.group(2)))
                self._ready.notify_all()
        with self._ready:
            self._ready.notify_all()

    @property
    def running(self) -> bool:
        """The process has not ended."""
        return self._process is not None and self._process.poll() is None

    @property
    def ports(self) -> dict[str, int]:
        """The first port of each kind of listener."""
        return {kind: ports[0] for kind, ports in self.listeners.items()}

    @property
    def url(self) -> str:
        """The management listener's base URL (the UI is at ``/``)."""
        return f"http://127.0.0.1:{self.ports['http']}"

    @property
    def amqp_url(self) -> str:
        """An ``amqp://`` URL for guest on vhost ``/``."""
        return f"amqp://guest:guest@127.0.0.1:{self.ports['amqp']}/%2F"

    def stop(self) -> None:
        """SIGTERM, and wait for the process to end (SIGKILL after WAIT seconds)."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(WAIT)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._reader is not None:
            self._reader.join(WAIT)
        if self._process.stdout is not None:
            self._process.stdout.close()

    def api(self, method: str, path: str, body: Any = None, user: str = "guest", password: str = "guest") -> Any:
        """One API request; the parsed JSON answer (None when empty).

        :raises urllib.error.HTTPError: for an error status.
        """
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=WAIT) as answer:
            raw = answer.read()
        return json.loads(raw) if raw else None


def start_browser() -> Any:
    """Headless Chromium (downloads go where :func:`save_downloads_in` says)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1000", "--disable-extensions", "--no-first-run"):
        options.add_argument(argument)
    options.add_experimental_option("prefs", {"download.prompt_for_download": False})
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))


def save_downloads_in(browser: Any, directory: str) -> None:
    """Make *browser* save what it downloads in *directory*."""
    browser.execute_cdp_cmd("Browser.setDownloadBehavior",
                            {"behavior": "allow", "downloadPath": os.path.abspath(directory)})


class SharedBrowser:
    """One headless Chromium for the browser tests of this process (starting
    one per test would double their time), quit when the process exits.
    Each test has its own broker, so its pages are of another origin than
    the last test's; :meth:`release` also empties the page's storage, in
    case the system gave the new broker a port used before."""

    _driver: Optional[Any] = None

    @classmethod
    def acquire(cls) -> Any:
        """The browser, started on first use."""
        if cls._driver is None:
            cls._driver = start_browser()
            atexit.register(cls.quit)
        return cls._driver

    @classmethod
    def release(cls) -> None:
        """Forget what the last test left: its page and that page's storage
        (a browser that no longer answers is quit, and the next test starts
        another)."""
        if cls._driver is None:
            return
        try:
            if cls._driver.current_url.startswith("http"):
                cls._driver.execute_script("sessionStorage.clear(); localStorage.clear();")
            cls._driver.get("about:blank")
        except Exception:
            cls.quit()

    @classmethod
    def quit(cls) -> None:
        """Stop the browser and its driver."""
        driver, cls._driver = cls._driver, None
        if driver is not None:
            with contextlib.suppress(Exception):
                driver.quit()


class BrowserTestCase(SynchronousTestCase):
    """A broker per test (:attr:`broker`, stopped after it) and the
    process's browser (:attr:`browser`, emptied after each test); a failing
    test leaves a screenshot and the page's HTML in its temporary directory
    (``_trial_temp/...``)."""

    skip = missing_browser()

    def broker_options(self) -> tuple[str, ...]:
        """Extra command-line options for the test's brokers."""
        return ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, method in list(vars(cls).items()):
            if name.startswith("test_") and callable(method):
                setattr(cls, name, _keeping_evidence(method))

    def setUp(self) -> None:
        self.work = os.path.abspath(self.mktemp())
        os.makedirs(self.work)
        self.broker = self.start_broker("broker")
        self.downloads = os.path.join(self.work, "downloads")
        os.makedirs(self.downloads)
        self.browser = SharedBrowser.acquire()
        self.addCleanup(SharedBrowser.release)
        save_downloads_in(self.browser, self.downloads)

    def start_broker(self, name: str) -> BrokerChild:
        """Another broker, stopped after the test."""
        broker = BrokerChild(os.path.join(self.work, name), *self.broker_options())
        broker.start()
        self.addCleanup(broker.stop)
        return broker

    def keep_evidence(self) -> None:
        """Save a screenshot and the page's HTML next to the test's files."""
        base = os.path.join(self.work, "failure")
        self.browser.save_screenshot(base + ".png")
        with open(base + ".html", "w") as page:
            page.write(self.browser.page_source)

    # -- driving the UI ------------------------------------------------------

    def wait_for(self, condition: Callable[[Any], Any], message: str) -> Any:
        """Wait until *condition(browser)* is truthy; its value."""
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        # Pages redraw what they show on every refresh: an element found a
        # moment ago may be gone, and the next look finds its successor.
        waiting = WebDriverWait(self.browser, WAIT, poll_frequency=0.1,
                                ignored_exceptions=[StaleElementReferenceException])
        return waiting.until(condition, message)

    def element(self, css: str) -> Any:
        """The visible element *css* selects, once there is one."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as shown

        return self.wait_for(shown.visibility_of_element_located((By.CSS_SELECTOR, css)), f"nothing visible at {css}")

    def text_of(self, css: str, pattern: str) -> str:
        """Wait until the element at *css* has text matching *pattern*; the text."""
        from selenium.webdriver.common.by import By

        def matching(browser: Any) -> Any:
            for found in browser.find_elements(By.CSS_SELECTOR, css):
                text = found.text
                if re.search(pattern, text):
                    return text
            return False

        return str(self.wait_for(matching, f"no {pattern!r} at {css}"))

    def type_into(self, css: str, text: str) -> None:
        """Replace the text of the input at *css*."""
        field = self.element(css)
        field.clear()
        field.send_keys(text)

    def fill_form(self, form: str, **values: Any) -> None:
        """Set the fields of the form named *form*: text for inputs and
        text areas, the option's value for selects, a bool for checkboxes,
        a file path for file inputs."""
        from selenium.webdriver.support.ui import Select

        for name, value in values.items():
            field = self.element(f'form[name="{form}"] [name="{name}"]')
            if field.tag_name == "select":
                self.wait_for(lambda _: field.find_elements("css selector", f'option[value="{value}"]'),
                              f"no option {value!r} in {form}.{name}")
                Select(field).select_by_value(str(value))
            elif field.get_attribute("type") == "checkbox":
                if field.is_selected() != bool(value):
                    field.click()
            elif field.get_attribute("type") == "file":
                field.send_keys(str(value))
            else:
                field.clear()
                field.send_keys(str(value))

    def submit_form(self, form: str, expected: str, **values: Any) -> str:
        """Fill and submit the form named *form*, and wait for its message to
        match *expected* (a regular expression); the message."""
        self.fill_form(form, **values)
        message = f'form[name="{form}"] .form-message'
        self.browser.execute_script("document.querySelector(arguments[0]).textContent = ''", message)
        self.element(f'form[name="{form}"] button[type="submit"]').click()
        text = self.text_of(message, ".")
        self.assertRegex(text, expected)
        return text

    def open(self, fragment: str = "/") -> None:
        """Load the UI at *fragment* (e.g. ``/queues``); once logged in, wait
        until the page shows its first answers (so that nothing moves under
        a click when they arrive)."""
        self.browser.get(f"{self.broker.url}/#{fragment}")
        if self.browser.execute_script("return sessionStorage.length"):
            self.wait_shown(re.escape(fragment))

    def wait_shown(self, fragment: str) -> None:
        """Wait until the page whose #fragment matches *fragment* (a regular
        expression) has shown its first answers (a page still waiting for
        them has no mark at all, which no pattern matches)."""

        def shown(browser: Any) -> Any:
            mark = browser.execute_script("return document.body.dataset.shown")
            return mark is not None and re.fullmatch(fragment, mark)

        self.wait_for(shown, f"no page {fragment} filled in")

    def log_in(self, user: str = "guest", password: str = "guest") -> None:
        """Log in through the log-in form and wait for the application."""
        self.open()
        self.type_into("#login-user", user)
        self.type_into("#login-password", password)
        self.element("#login-submit").click()
        self.text_of("#current-user", f"^{re.escape(user)}$")
        self.wait_shown("/?")


def _keeping_evidence(test: Callable[..., Any]) -> Callable[..., Any]:
    """*test*, saving the browser's screen when it fails."""

    @functools.wraps(test)
    def run(self: BrowserTestCase, *args: Any, **kwargs: Any) -> Any:
        try:
            return test(self, *args, **kwargs)
        except BaseException:
            with contextlib.suppress(Exception):
                self.keep_evidence()
            raise

    return run
