"""The management web UI in headless Chromium, against a broker in a child
process: log-in, and what each page shows and does, checked over AMQP and
the API. (tests/test_packaging.py checks an installed copy has every UI file.)"""

from __future__ import annotations

from tests.management.browser import BrowserTestCase


class LoginTests(BrowserTestCase):
    """Log-in with the API's users and tags."""

    def test_guest_logs_in_and_sees_the_overview(self) -> None:
        self.log_in()
        self.text_of("#total-exchanges .value", r"^\d+$")
        self.text_of("header nav a.active", "^Overview$")

    def test_wrong_password_is_refused(self) -> None:
        self.open()
        self.type_into("#login-user", "guest")
        self.type_into("#login-password", "wrong")
        self.element("#login-submit").click()
        self.text_of("#login-error", "Login failed")
        self.assertFalse(self.element("#login-screen").get_attribute("hidden"))
        self.assertEqual(self.browser.find_element("css selector", "#app-screen").is_displayed(), False)

    def test_user_without_management_tag_is_refused(self) -> None:
        self.broker.api("PUT", "/api/users/plain", {"password": "secret", "tags": ""})
        self.open()
        self.type_into("#login-user", "plain")
        self.type_into("#login-password", "secret")
        self.element("#login-submit").click()
        self.text_of("#login-error", "Not management user")

    def test_log_out_returns_to_the_log_in_form(self) -> None:
        self.log_in()
        self.element("#logout").click()
        self.element("#login-user")
        self.open()
        self.element("#login-user")
