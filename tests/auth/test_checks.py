"""The auth system checks: each id fires on its misconfiguration and only then."""

from __future__ import annotations

from typing import Any

import pytest

from poppy_django.verifier.checks import (
    check_dev_authority,
    check_dpop_verifier,
    check_fake_verifier,
)

GOOD = {
    "AUTHENTICATE": "poppy_django.verifier.dpop.verify",
    "ISSUER": "https://issuer.example",
    "TOKENS": {"JWKS_URL": "https://issuer.example/jwks.json"},
    "DEV_AUTHORITY": False,
}
REDIS = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://127.0.0.1:6379/3",
    }
}


def ids(settings: Any, caches: Any = None, debug: bool = True, **poppy: Any) -> list[str]:
    settings.DEBUG = debug
    settings.CACHES = caches or REDIS
    settings.POPPY = {**settings.POPPY, **GOOD, **poppy}
    return sorted(
        m.id for m in check_dev_authority() + check_dpop_verifier() + check_fake_verifier()
    )


def test_good_configuration_passes(settings: Any) -> None:
    assert ids(settings, debug=False) == []


def test_e101_dev_authority_in_production(settings: Any) -> None:
    assert ids(settings, debug=False, DEV_AUTHORITY=True) == ["poppy_django.E101"]
    assert ids(settings, debug=True, DEV_AUTHORITY=True) == []


def test_w103_dev_authority_explicitly_allowed_without_debug(settings: Any) -> None:
    allowed = {"ALLOW_WITHOUT_DEBUG": True}
    assert ids(settings, debug=False, DEV_AUTHORITY=allowed) == ["poppy_django.W103"]
    assert ids(settings, debug=True, DEV_AUTHORITY=allowed) == []
    truthy = {"ALLOW_WITHOUT_DEBUG": "yes"}  # only True counts as the opt-in
    assert ids(settings, debug=False, DEV_AUTHORITY=truthy) == ["poppy_django.E101"]


def test_e107_dev_authority_without_an_issuer_app(settings: Any) -> None:
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "poppy_django.authority"]
    assert "poppy_django.E107" in ids(settings, ISSUER=None, DEV_AUTHORITY=True)


def test_e108_the_fake_verifier_is_refused_without_debug(settings: Any) -> None:
    from poppy_django.verifier import fake

    for fake_verifier in ("poppy_django.verifier.fake.verify", fake.verify):
        assert ids(settings, debug=False, AUTHENTICATE=fake_verifier) == ["poppy_django.E108"]
        assert ids(settings, debug=True, AUTHENTICATE=fake_verifier) == []


def test_w104_the_fake_verifier_explicitly_allowed_without_debug(settings: Any) -> None:
    fake_verifier = "poppy_django.verifier.fake.verify"
    allowed = {"AUTHENTICATE": fake_verifier, "ALLOW_FAKE_VERIFIER_WITHOUT_DEBUG": True}
    assert ids(settings, debug=False, **allowed) == ["poppy_django.W104"]
    assert ids(settings, debug=True, **allowed) == []
    truthy = {**allowed, "ALLOW_FAKE_VERIFIER_WITHOUT_DEBUG": "yes"}  # only True opts in
    assert ids(settings, debug=False, **truthy) == ["poppy_django.E108"]


@pytest.mark.parametrize("opted_in", [False, True])
def test_the_example_project_runs_the_fake_verifier_without_debug_only_when_opted_in(
    tmp_path: Any, opted_in: bool
) -> None:
    """POPPY_AUTHENTICATE=…fake.verify alone is E108 (``manage.py check``, and so
    ``migrate``, stop); with the multi-process tests' and benchmarks' opt-in,
    POPPY_ALLOW_FAKE_VERIFIER=1, it is W104 and the check passes. Nothing is silenced."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "POPPY_"))}
    env.update({"DJANGO_DEBUG": "0", "POPPY_VAR_DIR": str(tmp_path), "POPPY_DEV_AUTHORITY": "0"})
    env["DJANGO_SETTINGS_MODULE"] = "example_project.settings"
    env["POPPY_AUTHENTICATE"] = "poppy_django.verifier.fake.verify"
    if opted_in:
        env["POPPY_ALLOW_FAKE_VERIFIER"] = "1"
    checked = subprocess.run(
        [sys.executable, "-c", CHECK_WITH_FAKE],
        env=env,
        capture_output=True,
        text=True,
        cwd=root,
    )
    said = checked.stdout + checked.stderr
    if opted_in:
        assert checked.returncode == 0, checked.stderr
        assert "W104" in said and "E108" not in said
    else:
        assert checked.returncode != 0 and "poppy_django.E108" in said


#: ``manage.py check`` in a fresh interpreter: E108 raised by the check run, or W104 told.
CHECK_WITH_FAKE = (
    "import django; django.setup(); "
    "from django.core.management import call_command; call_command('check')"
)


def test_e102_missing_issuer(settings: Any) -> None:
    assert ids(settings, ISSUER=None) == ["poppy_django.E102"]
    assert ids(settings, ISSUER=None, DEV_AUTHORITY=True) == []  # the authority is the issuer


@pytest.mark.parametrize("alg", ["none", "HS256", "ES256K-typo"])
@pytest.mark.parametrize("key", ["ALGORITHMS", "DPOP_ALGORITHMS"])
def test_e103_disallowed_algorithm(settings: Any, alg: str, key: str) -> None:
    tokens = {**GOOD["TOKENS"], key: ["ES256", alg]}
    assert ids(settings, TOKENS=tokens) == ["poppy_django.E103"]


def test_e104_no_keys(settings: Any) -> None:
    settings.INSTALLED_APPS = [a for a in settings.INSTALLED_APPS if a != "poppy_django.authority"]
    assert ids(settings, TOKENS={}) == ["poppy_django.E104"]
    assert ids(settings, TOKENS={"JWKS": {"keys": []}}) == []


def test_e104_not_when_the_project_is_its_own_issuer(settings: Any) -> None:
    """With poppy_django.authority installed, the verifier uses the authority's own key."""
    assert "poppy_django.authority" in settings.INSTALLED_APPS
    assert ids(settings, TOKENS={}) == []


def test_e105_bad_tokens_options(settings: Any) -> None:
    assert ids(settings, TOKENS={**GOOD["TOKENS"], "LEEWAY": 5}) == ["poppy_django.E105"]
    assert ids(settings, TOKENS={**GOOD["TOKENS"], "LEEWAY_SECONDS": "x"}) == ["poppy_django.E105"]
    assert ids(settings, TOKENS={**GOOD["TOKENS"], "CLAIMS": {"usr": "sub"}}) == [
        "poppy_django.E105"
    ]


def test_e106_and_w101_replay_cache(settings: Any) -> None:
    dummy = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
    local = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    assert ids(settings, caches=dummy) == ["poppy_django.E106"]
    assert ids(settings, caches=local, debug=False) == ["poppy_django.W101"]
    assert ids(settings, caches=local, debug=True) == []
    tokens = {**GOOD["TOKENS"], "REPLAY_CACHE": "missing"}
    assert ids(settings, TOKENS=tokens) == ["poppy_django.E106"]


def test_w102_plain_http_jwks_in_production(settings: Any) -> None:
    assert ids(settings, debug=False, TOKENS={"JWKS_URL": "http://issuer/jwks"}) == [
        "poppy_django.W102"
    ]


def test_dpop_checks_only_for_the_dpop_verifier(settings: Any) -> None:
    assert (
        ids(settings, AUTHENTICATE="poppy_django.verifier.fake.verify", ISSUER=None, TOKENS={})
        == []
    )


def test_run_by_the_registered_checks(settings: Any) -> None:
    from django.core import checks

    from poppy_django.checks import check_auth

    assert check_auth in checks.registry.registry.get_checks()
    settings.DEBUG = True
    assert "poppy_django.E101" not in [m.id for m in check_auth()]
    settings.DEBUG = False  # the development authority is refused in production
    assert "poppy_django.E101" in [m.id for m in check_auth()]
