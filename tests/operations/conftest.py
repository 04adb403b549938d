"""The authority's world (tests/authority/conftest.py): Acme as its own issuer, and Atlas."""

from tests.authority.conftest import (  # noqa: F401 - fixtures
    _sites,
    acme_settings,
    customers,
    world,
)
