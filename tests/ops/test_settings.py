"""``poppy_settings``: one typed attribute per POPPY key, parsed once, reset on change."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import resolve

from poppy_django.api import discovery
from poppy_django.conf import DEFAULTS, PoppySettings, Setting, endpoint_prefix, poppy_settings
from poppy_django.engine.executors import ThreadExecutor
from poppy_django.mcp import config as mcp_config
from poppy_django.operations import options as operations_options
from poppy_django.token_options import DEFAULT_CLAIMS


def test_every_default_has_exactly_one_typed_attribute():
    declared = {name for name, value in vars(PoppySettings).items() if isinstance(value, Setting)}
    assert declared == set(DEFAULTS)


def test_values_are_parsed_to_their_type_and_defaults_fill_in():
    configured = PoppySettings({"WAIT_MAX_SECONDS": 5, "EXECUTOR_THREADS": 2})
    assert configured.WAIT_MAX_SECONDS == 5.0 and isinstance(configured.WAIT_MAX_SECONDS, float)
    assert configured.EXECUTOR_THREADS == 2
    assert DEFAULTS["PATH"] == configured.PATH
    assert configured.RETENTION_SECONDS is None
    assert configured.EXECUTOR is ThreadExecutor  # an import string, imported
    assert configured.HANDOFF_HOOKS == {}


@pytest.mark.parametrize(
    ("name", "value"),
    [("PAGE_SIZE", "100"), ("WAIT_MAX_SECONDS", True), ("PATH", 7), ("MODELS", ["x"])],
)
def test_a_value_of_the_wrong_type_names_its_key(name, value):
    with pytest.raises(ImproperlyConfigured, match=name):
        getattr(PoppySettings({name: value}), name)


def test_an_unknown_key_names_itself():
    with pytest.raises(ImproperlyConfigured, match="PAGESIZE"):
        _ = PoppySettings({"PAGESIZE": 10}).PAGE_SIZE


@pytest.mark.parametrize(
    "name, typo, read",
    [
        ("MCP", "ENABLE", lambda: mcp_config.enabled()),
        ("OPERATIONS", "ENABLE", lambda: operations_options.options()),
        ("DISCOVERY", "ORGANISATION", lambda: discovery.poppy_document()),
    ],
)
def test_a_parts_own_dict_refuses_an_unknown_key_when_read(settings, name, typo, read):
    settings.POPPY = {**settings.POPPY, "BASE_URL": "https://acme.example", name: {typo: True}}
    with pytest.raises(
        ImproperlyConfigured, match=rf'Unknown POPPY\["{name}"\] key\(s\): {typo}\.'
    ):
        read()


def test_a_value_is_parsed_once_and_again_after_the_setting_changes(settings):
    first = poppy_settings.TOKENS
    assert poppy_settings.TOKENS is first  # cached, not parsed per read
    settings.POPPY = {**settings.POPPY, "PAGE_SIZE": 7, "TOKENS": {"LEEWAY_SECONDS": 5}}
    assert poppy_settings.PAGE_SIZE == 7
    assert poppy_settings.token_options.leeway == 5.0


def test_tokens_are_parsed_in_one_place_with_every_default():
    options = PoppySettings({"TOKENS": {"CLAIMS": {"user_id": "uid"}}}).token_options
    assert options.claims == {**DEFAULT_CLAIMS, "user_id": "uid"}
    assert options.dpop_algorithms == ("ES256", "RS256", "EdDSA")
    with pytest.raises(ImproperlyConfigured, match="HS256"):
        _ = PoppySettings({"TOKENS": {"ALGORITHMS": ["HS256"]}}).token_options


def test_the_middleware_and_the_urlconf_use_the_same_endpoint_path(settings):
    assert endpoint_prefix() == "/" + DEFAULTS["PATH"]
    assert resolve(endpoint_prefix()).url_name == "conversations"
    # Read once, like the URLconf it describes: a later change needs a restart of both.
    settings.POPPY = {**settings.POPPY, "PATH": "elsewhere"}
    assert endpoint_prefix() == "/" + DEFAULTS["PATH"]
