"""The desk's fixtures (a signed-in desk user), for the desk campaign."""

from tests.desk.conftest import desk, desk_user  # noqa: F401 - fixtures used by name
