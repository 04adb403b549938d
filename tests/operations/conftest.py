"""Fixtures shared with other suites: the authority's world (Acme as its own issuer, and
Atlas, an SDK personal agent) and the desk's signed-in staff client."""

from tests.authority.conftest import (  # noqa: F401 - fixtures
    _sites,
    acme_settings,
    customers,
    world,
)
from tests.desk.conftest import desk, desk_user  # noqa: F401 - fixtures
