"""JWKS rotation against a real HTTP server on 127.0.0.1: a new kid is fetched, unknown kids
are refused without a fetch storm. pyjwt's ``PyJWKClient`` (its set's age and its refetch
cooldown) and ``RemoteKeys`` (its retry bound) read the monotonic clock: here they read a
:class:`~tests.waiting.Clock` the test advances past each bound. What the tests count is
fetches, never how long anything took."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest
from jwt import api_jwk, jwk_set_cache, jwks_client

from poppy_django.client import DPoPKey
from poppy_django.token_options import parse_options
from poppy_django.verifier import AuthRefusal, dpop
from poppy_django.verifier import jwks as poppy_jwks
from poppy_django.verifier.jwks import RemoteKeys
from tests.auth.conftest import dpop_poppy
from tests.auth.support import ENDPOINT_URL, ISSUER, NOW, Issuer, proof, request_info
from tests.waiting import Clock


class JWKSServer:
    """Serves ``issuer.jwks`` (read per request, so the test can rotate keys) and counts GETs."""

    def __init__(self, issuer: Issuer) -> None:
        self.issuer = issuer
        self.fetches = 0
        self.fail = False
        self.garbage: bytes | None = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.fetches += 1
                if server.fail:
                    self.send_response(500)
                    self.end_headers()
                    return
                body = server.garbage or json.dumps(server.issuer.jwks).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/jwks.json"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> JWKSServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def jwks_server(issuer: Issuer) -> Iterator[JWKSServer]:
    with JWKSServer(issuer) as server:
        yield server


#: The JWKS cooldown after a fetch, and how long a fetched set is used.
MIN_REFRESH = 30
MAX_AGE = 300


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The monotonic clock of pyjwt's JWKS client and set cache and of ``RemoteKeys``, moved
    by the test (each module looks ``time.monotonic`` up when it reads the time)."""
    clock = Clock(time.monotonic())
    moved = SimpleNamespace(monotonic=clock, time=time.time)
    for module in (jwks_client, jwk_set_cache, api_jwk, poppy_jwks):
        monkeypatch.setattr(module, "time", moved)
    return clock


def wait_out(clock: Clock, seconds: float) -> None:
    """Let a cooldown or cache time pass (just past it)."""
    clock.advance(seconds + 0.1)


def make_verifier(settings: Any, issuer: Issuer, server: JWKSServer) -> dpop.DPoPVerifier:
    dpop_poppy(settings, issuer)
    options = parse_options({"JWKS_URL": server.url})
    keys = RemoteKeys(server.url, max_age=MAX_AGE, min_refresh=MIN_REFRESH, timeout=5)
    return dpop.DPoPVerifier(
        options, issuer=ISSUER, keys=keys, path="poppy/conversations", clock=lambda: NOW
    )


def call(verify: dpop.DPoPVerifier, issuer: Issuer, kid: str) -> Any:
    key = DPoPKey()
    token = issuer.token(jkt=key.thumbprint, now=NOW, kid=kid)
    return verify(
        request_info("POST", ENDPOINT_URL, token, proof(key, "POST", ENDPOINT_URL, token, now=NOW))
    )


def test_rotation_fetches_a_new_kid_and_unknown_kids_cause_no_storm(
    clock: Clock, settings: Any, issuer: Issuer, jwks_server: JWKSServer
) -> None:
    verify = make_verifier(settings, issuer, jwks_server)
    assert call(verify, issuer, "k1")
    assert call(verify, issuer, "k1")
    assert jwks_server.fetches == 1  # cached

    # Just fetched: an unknown kid causes no refetch at all.
    with pytest.raises(AuthRefusal):
        call(verify, Issuer(kid="forged"), "forged")
    assert jwks_server.fetches == 1

    # Later, a forged kid many times: one refetch, every request refused.
    wait_out(clock, MIN_REFRESH)
    for _ in range(50):
        with pytest.raises(AuthRefusal) as caught:
            call(verify, Issuer(kid="forged"), "forged")
        assert caught.value.error == "invalid_token"
    assert jwks_server.fetches == 2

    # The issuer rotates in a new key: after the refetch interval, its kid is fetched once.
    issuer.add_key("k2", "RS256")
    wait_out(clock, MIN_REFRESH)
    assert call(verify, issuer, "k2")
    assert call(verify, issuer, "k2")
    assert jwks_server.fetches == 3
    assert call(verify, issuer, "k1")  # the old key still works while it is published

    # The old key is retired: after max_age the set is refreshed and k1 is refused.
    del issuer.keys["k1"]
    wait_out(clock, MAX_AGE)
    assert call(verify, issuer, "k2")
    assert jwks_server.fetches == 4
    issuer.kid = "k2"
    with pytest.raises(AuthRefusal):
        call(verify, Issuer(kid="k1"), "k1")


def test_fetch_failure_keeps_the_old_keys(
    clock: Clock, settings: Any, issuer: Issuer, jwks_server: JWKSServer
) -> None:
    verify = make_verifier(settings, issuer, jwks_server)
    assert call(verify, issuer, "k1")
    jwks_server.fail = True
    wait_out(clock, MAX_AGE)  # stale: a refresh is attempted, fails, the old keys stay
    assert call(verify, issuer, "k1")
    assert jwks_server.fetches == 2
    assert call(verify, issuer, "k1")
    assert jwks_server.fetches == 2  # not retried before min_refresh
    # While the issuer is down, forged kids cause no fetches either (PyJWKClient alone would
    # try on every request once its set expired), and once it is back the keys refresh.
    for _ in range(20):
        with pytest.raises(AuthRefusal):
            call(verify, Issuer(kid="forged"), "forged")
    assert jwks_server.fetches == 2
    wait_out(clock, MIN_REFRESH)
    assert call(verify, issuer, "k1")
    assert jwks_server.fetches == 3
    jwks_server.fail = False
    wait_out(clock, MIN_REFRESH)
    issuer.add_key("k2")
    assert call(verify, issuer, "k2")
    assert jwks_server.fetches == 4


@pytest.mark.parametrize("garbage", [b"[]", b"{not json", b'{"keys": [{"kty": "oct"}]}'])
def test_a_malformed_jwks_keeps_the_old_keys(
    clock: Clock, settings: Any, issuer: Issuer, jwks_server: JWKSServer, garbage: bytes
) -> None:
    verify = make_verifier(settings, issuer, jwks_server)
    assert call(verify, issuer, "k1")
    jwks_server.garbage = garbage
    wait_out(clock, MAX_AGE)
    for _ in range(5):
        assert call(verify, issuer, "k1")
    assert jwks_server.fetches == 2


def test_concurrent_unknown_kids_share_one_fetch(
    clock: Clock, issuer: Issuer, jwks_server: JWKSServer
) -> None:
    keys = RemoteKeys(jwks_server.url, max_age=300, min_refresh=MIN_REFRESH)
    assert keys.key("k1", "ES256") is not None
    wait_out(clock, MIN_REFRESH)
    threads = [threading.Thread(target=keys.key, args=(f"x{n}", "ES256")) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert jwks_server.fetches == 2


def test_jwks_url_from_settings(
    settings: Any, issuer: Issuer, jwks_server: JWKSServer, pa_key: DPoPKey
) -> None:
    """``TOKENS["JWKS_URL"]`` wires a remote key source into the configured verifier."""
    import time

    dpop_poppy(settings, issuer)
    settings.POPPY = {**settings.POPPY, "TOKENS": {"JWKS_URL": jwks_server.url}}
    now = time.time()
    token = issuer.token(jkt=pa_key.thumbprint, now=now)
    assert dpop.verify(
        request_info(
            "POST", ENDPOINT_URL, token, pa_key.proof("POST", ENDPOINT_URL, access_token=token)
        )
    )
    assert jwks_server.fetches == 1
    dpop.reset()
