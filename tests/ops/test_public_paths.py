"""The paths the docs name keep working after the layout moved the code into layer folders.

The package root re-exports each layer's public names (the stable paths to import or to put
in settings); ``poppy_django.auth`` is the verifier's old name, kept with a warning."""

from __future__ import annotations

import importlib
import warnings

import pytest
from django.core import checks
from django.test import override_settings
from django.utils.module_loading import import_string

from poppy_django.checks import check_auth

FACADES = {
    "poppy_django.middleware": "poppy_django.api.middleware",
    "poppy_django.executors": "poppy_django.engine.executors",
    "poppy_django.rest_framework": "poppy_django.api.rest_framework",
    "poppy_django.permissions": "poppy_django.api.permissions",
    "poppy_django.throttling": "poppy_django.api.throttling",
    "poppy_django.views": "poppy_django.api.views",
    "poppy_django.endpoint": "poppy_django.api.endpoint",
    "poppy_django.schema": "poppy_django.api.schema",
    "poppy_django.discovery": "poppy_django.api.discovery",
    "poppy_django.approvals": "poppy_django.desk.decisions",
}


@pytest.mark.parametrize("public", sorted(FACADES))
def test_the_root_re_exports_the_same_objects(public: str) -> None:
    facade, layer = importlib.import_module(public), importlib.import_module(FACADES[public])
    assert facade.__all__
    for name in facade.__all__:
        assert getattr(facade, name) is getattr(layer, name), name


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("poppy_django.auth.dpop.verify", "poppy_django.verifier.dpop.verify"),
        ("poppy_django.auth.fake.verify", "poppy_django.verifier.fake.verify"),
        ("poppy_django.auth.sessions.revoked", "poppy_django.verifier.sessions.revoked"),
        ("poppy_django.auth.local_issuer.register", "poppy_django.verifier.local_issuer.register"),
        ("poppy_django.auth.Principal", "poppy_django.verifier.Principal"),
    ],
)
def test_the_verifiers_old_paths_name_the_same_objects(old: str, new: str) -> None:
    assert import_string(old) is import_string(new)


def test_importing_the_old_package_warns() -> None:
    import sys

    sys.modules.pop("poppy_django.auth", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        importlib.import_module("poppy_django.auth")
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)


def test_the_fake_verifier_by_its_old_path_is_still_refused_in_production(settings) -> None:
    settings.POPPY = {**settings.POPPY, "AUTHENTICATE": "poppy_django.auth.fake.verify"}
    with override_settings(DEBUG=False):
        found = [m.id for m in check_auth() if isinstance(m, checks.CheckMessage)]
    assert "poppy_django.E108" in found
