"""Teams: the Django groups named in ``POPPY["DESK_TEAMS"]``.

A team is a group of the project's own (its members edited in the admin, as any group's), so
the desk keeps no list of people of its own. A conversation may be for a team
(``Conversation.team``): it waits in that team's queue and its handoffs go to that team's
members (:mod:`.routing`). A group not named in the setting is no team, whatever its name.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from poppy_django.conf import poppy_settings
from poppy_django.errors import PoppyError


def names() -> list[str]:
    """The teams, as the setting lists them."""
    return list(poppy_settings.DESK_TEAMS)


def checked(team: str) -> str:
    """``team`` if it is one ("" for the whole desk), or ``unknown_team``."""
    if team and team not in names():
        raise PoppyError("unknown_team", f"{team!r} is not a team of the desk.")
    return team


def members(team: str) -> set[str]:
    """The usernames of ``team``'s active members (none for a group that does not exist)."""
    model = get_user_model()
    group = Group.objects.filter(name=checked(team)).first()
    if group is None:
        return set()
    found = model._default_manager.filter(groups=group, is_active=True)
    return {user.get_username() for user in found}


def of(username: str) -> list[str]:
    """The teams ``username`` is in, in the setting's order."""
    model = get_user_model()
    user = model._default_manager.filter(**{model.USERNAME_FIELD: username}).first()
    if user is None:
        return []
    theirs = set(Group.objects.filter(user=user).values_list("name", flat=True))
    return [name for name in names() if name in theirs]
