"""A User approving a Device Sign-In on the company's own pages, over real HTTP."""

from __future__ import annotations

import re

import httpx

CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def approve_device_code(base: str, user_code: str, account: str, password: str, scope: str) -> None:
    """What the User does in a browser: log in, open the link, allow ``scope``."""
    with httpx.Client(base_url=base, timeout=30) as browser:

        def post(path: str, page: httpx.Response, form: dict[str, str]) -> httpx.Response:
            token = CSRF.search(page.text)
            assert token, page.text
            return browser.post(
                path,
                data={"csrfmiddlewaretoken": token.group(1), **form},
                headers={"Referer": str(page.url), "Origin": base},
            )

        login = browser.get("/account/login")
        done = post("/account/login", login, {"username": account, "password": password})
        assert done.status_code == 302, done.text
        consent = browser.get(f"/device?user_code={user_code}")
        assert consent.status_code == 200 and "Allow" in consent.text, consent.text
        decision = {"user_code": user_code, "decision": "approve", "scope": scope}
        answer = post("/device", consent, decision)
        assert "is connected" in answer.text, answer.text
