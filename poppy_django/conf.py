"""The ``POPPY`` settings dict: defaults, import strings resolved once, reloaded on change.

Every other module reads configuration through :data:`poppy_settings` so that a default is
written exactly once (here) and tests can swap a key with ``override_settings``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

#: The default wording of everything the app writes on the company's behalf.
DEFAULT_TEXTS: dict[str, str] = {
    "failed_turn": "Sorry, something went wrong on our side. Please try again.",
    "no_one_available": "Sorry, no one is available to take over right now. I can keep helping.",
    "handoff_unavailable": "No one can join right now: {reason}",
    "sign_in_required": "Please sign in so I can do that ({scope}).",
    "insufficient_scope": "I need the {scope} permission to do that.",
    "action_succeeded": "Done: {summary}.",
    "action_failed": "Could not {summary_lower}: {error}.",
    "action_rejected": "Not done: {summary} was declined.",
    "action_pending_approval": "{summary}: waiting for approval by our staff.",
}

DEFAULTS: dict[str, Any] = {
    # The public origin (scheme://host[:port]) DPoP proofs name; None: taken from the request.
    "BASE_URL": None,
    # Where the endpoint is mounted below the project's include() of poppy_django.urls.
    "PATH": "poppy/conversations",
    # The registered Company Agent that answers conversations.
    "AGENT": "support",
    # The model each agent runs: "scripted", or a pydantic-ai model name ("openai:gpt-4o").
    "MODEL": "scripted",
    # Per-agent overrides of MODEL: {"support": "anthropic:claude-sonnet-4-0"}.
    "MODELS": {},
    # Long-poll cap in seconds (wire: 30).
    "WAIT_MAX_SECONDS": 30.0,
    # Events per JSON read page (wire: 100).
    "PAGE_SIZE": 100,
    # Request body limit in bytes (wire: 1 MiB).
    "MAX_BODY_BYTES": 1024 * 1024,
    # Events older than this many seconds may be pruned; None keeps everything.
    "RETENTION_SECONDS": None,
    # Import string of the token verifier: callable({method, url, headers}) -> Principal.
    "AUTHENTICATE": None,
    # The Poppy issuer (authorization server) URL; an https issuer upgrades the public URL.
    "ISSUER": None,
    # The default DPoP/Session Token verifier's options (see docs/settings.md).
    "TOKENS": {},
    # The development authority (example project and tests only; refused in production).
    "DEV_AUTHORITY": False,
    # poppy.json: organization and extra fields of the discovery document.
    "DISCOVERY": {},
    # Import string of actor_for(principal, default) -> Actor | None.
    "ACTOR_FOR": None,
    # Import string of the turn executor class.
    "EXECUTOR": "poppy_django.executors.ThreadExecutor",
    # Worker threads of the in-process executor.
    "EXECUTOR_THREADS": 4,
    # "approve-delegated" (the token's scopes approve actions) or "reject".
    "ACTIONS": "approve-delegated",
    # Overrides of DEFAULT_TEXTS.
    "TEXTS": {},
    # Import string of format_action(action: dict, texts: dict) -> str.
    "ACTION_FORMATTER": "poppy_django.agent.outcomes.format_action",
    # Import strings of the handoff hooks: request, message, cancel.
    "HANDOFF_HOOKS": {},
    # Import strings of the Direct Conversation hooks: opened, closed.
    "DIRECT_HOOKS": {},
    # Turn lease: how long a worker's claim lasts without a heartbeat.
    "LEASE_SECONDS": 30.0,
    # Heartbeat interval; must be well below LEASE_SECONDS.
    "HEARTBEAT_SECONDS": 10.0,
    # A turn's time limit: past it the turn is abandoned and answered with the failed-turn
    # message. Also bounds a wait for a busy agent thread (plus LEASE_SECONDS).
    "TURN_TIMEOUT_SECONDS": 120.0,
    # Attempts of one turn (or one approved action) before it is answered as failed.
    "TURN_MAX_ATTEMPTS": 3,
    # How often each worker (and the embedded executor's process) takes up conversations
    # left working by a dead writer; None turns the in-process recovery off.
    "SWEEP_SECONDS": 5.0,
    # SSE: a keep-alive comment this often, and the longest a stream stays open.
    "STREAM_KEEPALIVE_SECONDS": 15.0,
    "STREAM_MAX_SECONDS": 300.0,
    # How often each process's watchdog checks, in one query for all its waiting readers,
    # for events whose wake-up was lost (a failed publish), and wakes those readers.
    "WAKE_FALLBACK_SECONDS": 10.0,
}

#: Keys whose value is an import string resolved once per settings version.
IMPORT_STRINGS = frozenset({"AUTHENTICATE", "ACTOR_FOR", "EXECUTOR", "ACTION_FORMATTER"})
#: Keys whose value is a mapping of import strings.
IMPORT_STRING_MAPS = frozenset({"HANDOFF_HOOKS", "DIRECT_HOOKS"})


class PoppySettings:
    """Typed, cached access to ``settings.POPPY`` with defaults and import strings.

    An unknown key raises an error naming it, so a typo fails loudly at first use.
    """

    def __init__(self, user_settings: Mapping[str, Any] | None = None) -> None:
        self._explicit = user_settings

    @functools.cached_property
    def _user(self) -> dict[str, Any]:
        if self._explicit is not None:
            raw = dict(self._explicit)
        else:
            raw = dict(getattr(settings, "POPPY", {}) or {})
        unknown = sorted(set(raw) - set(DEFAULTS))
        if unknown:
            raise ImproperlyConfigured(
                f"Unknown POPPY setting(s): {', '.join(unknown)}. Known: {', '.join(DEFAULTS)}."
            )
        return raw

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"Unknown POPPY setting: {name!r}")
        value = self._user.get(name, DEFAULTS[name])
        if name in IMPORT_STRINGS:
            value = _resolve(name, value)
        elif name in IMPORT_STRING_MAPS:
            value = {key: _resolve(f"{name}[{key!r}]", item) for key, item in value.items()}
        # Cache on the instance: __getattr__ runs only for names not yet set.
        setattr(self, name, value)
        return value

    def raw(self, name: str) -> Any:
        """The configured value before import strings are resolved (for checks and docs)."""
        if name not in DEFAULTS:
            raise AttributeError(f"Unknown POPPY setting: {name!r}")
        return self._user.get(name, DEFAULTS[name])

    @property
    def texts(self) -> dict[str, str]:
        return {**DEFAULT_TEXTS, **self.TEXTS}

    def reload(self) -> None:
        for key in list(self.__dict__):
            if key != "_explicit":  # the constructor's argument, not a cached value
                delattr(self, key)


def _resolve(name: str, value: Any) -> Any:
    if value is None or callable(value):
        return value
    if not isinstance(value, str):
        raise ImproperlyConfigured(f"POPPY[{name!r}] must be an import string or a callable.")
    try:
        return import_string(value)
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"POPPY[{name!r}] = {value!r} cannot be imported: {exc}"
        ) from exc


poppy_settings = PoppySettings()


@receiver(setting_changed)
def _reload_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting == "POPPY":
        poppy_settings.reload()


def hook(group: str, name: str) -> Callable[..., Any] | None:
    """A configured hook (``HANDOFF_HOOKS`` / ``DIRECT_HOOKS``) or None."""
    hooks: dict[str, Callable[..., Any]] = getattr(poppy_settings, group)
    return hooks.get(name)
