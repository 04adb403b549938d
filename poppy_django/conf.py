"""The ``POPPY`` settings dict: defaults, one typed attribute per key, reloaded on change.

Every other module reads configuration through :data:`poppy_settings`, so a default is
written exactly once (:data:`DEFAULTS`), each value is checked and converted once per
settings version (import strings imported, numbers made numbers), callers get a real type
instead of ``Any``, and tests can swap a key with ``override_settings``.

A new setting is two lines: its default (with a comment) in :data:`DEFAULTS`, and its typed
attribute on :class:`PoppySettings` (``NAME = Setting(parser)``). ``tests/ops/test_settings.py``
fails when one is missing.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, Protocol, TypeVar, overload

from django.conf import ENVIRONMENT_VARIABLE, settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from poppy_django.token_options import TokenOptions, parse_options
from poppy_django.unknown_keys import unknown_keys

#: The default wording of everything the app writes on the company's behalf.
DEFAULT_TEXTS: dict[str, str] = {
    "failed_turn": "Sorry, something went wrong on our side. Please try again.",
    "no_one_available": "Sorry, no one is available to take over right now. I can keep helping.",
    "handoff_unavailable": "No one can join right now: {reason}",
    # The reasons the default handoff hooks give (``{reason}`` above).
    "no_staff_available": "no one from our team is available.",
    "outside_office_hours": "our team is away now (office hours: {hours}).",
    "handoff_timed_out": "no one from our team could join in time.",
    "sign_in_required": "Please sign in so I can do that ({scope}).",
    "insufficient_scope": "I need the {scope} permission to do that.",
    "action_succeeded": "Done: {summary}.",
    "action_failed": "Could not {summary_lower}: {error}.",
    "action_rejected": "Not done: {summary} was declined.",
    "action_pending_approval": "{summary}: waiting for approval by our staff.",
    "action_operation_proposed": "{summary}: please confirm it, and I will do it.",
    "operation_revised": "The terms changed: {summary}. Please confirm this version.",
    # The satisfaction survey after a person handled a conversation (CSAT_SURVEY): its
    # question (also the component's fallback text) and the thanks for an answer.
    "csat_question": (
        "How would you rate the help you got from our team? Answer with a number from 1 "
        "(poor) to 5 (excellent), and a comment if you like."
    ),
    "csat_thanks": "Thank you for your rating.",
}

#: A tag's name (the desk's tags, ``TAG_RULES``): a slug of at most 50 characters.
TAG_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,49}")

DEFAULTS: dict[str, Any] = {
    # The public origin (scheme://host[:port]) DPoP proofs name; None: taken from the request.
    "BASE_URL": None,
    # Where the endpoint is mounted below the project's include() of poppy_django.urls.
    "PATH": "poppy/conversations",
    # The registered Company Agent that answers conversations.
    "AGENT": "support",
    # Import string of agent_for(principal, context) -> str | None: the agent of a new
    # conversation (by client, signed-in state, the first message's context); None: AGENT.
    "AGENT_FOR": None,
    # The model each agent runs: "scripted", or a pydantic-ai model name ("openai:gpt-4o"),
    # or a fallback chain of them (["openai:gpt-4o", "anthropic:claude-sonnet-4-0"]).
    "MODEL": "scripted",
    # Per-agent overrides of MODEL: {"support": "anthropic:claude-sonnet-4-0"}.
    "MODELS": {},
    # Long-poll cap in seconds (wire: 30).
    "WAIT_MAX_SECONDS": 30.0,
    # Events per JSON read page (wire: 100).
    "PAGE_SIZE": 100,
    # Bytes of event JSON each web process keeps of the conversations read there, to answer
    # reads from memory (poppy_django.store.tail; 0: every read asks the database).
    "TAIL_MAX_BYTES": 16 * 1024 * 1024,
    # Middleware (import paths, as in MIDDLEWARE) that PoppyEndpointMiddleware skips on the
    # endpoint's paths; every other middleware listed after it still runs there.
    "SKIP_MIDDLEWARE": [
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.auth.middleware.LoginRequiredMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
        "poppy_django.authority.website.BrowserSessionMiddleware",
    ],
    # Hook-only middleware (import paths) whose hooks never block (no database, network or
    # files): on the endpoint's paths they run on the event loop, with no thread hop.
    "NONBLOCKING_MIDDLEWARE": [
        "django.middleware.security.SecurityMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
    ],
    # Request body limit in bytes (wire: 1 MiB).
    "MAX_BODY_BYTES": 1024 * 1024,
    # The other channels' body limits in bytes, by route (poppy_django.asgi.PoppyBodyLimit);
    # a dict given here is merged over these.
    "BODY_LIMITS": {
        "mcp": 256 * 1024,
        "operations": 64 * 1024,
        "feedback": 16 * 1024,
        "sign_in": 16 * 1024,
        "browser_session": 16 * 1024,
        "authority": 64 * 1024,
    },
    # The most seconds a request's body may take to arrive on those routes (then 408).
    "BODY_READ_SECONDS": 20,
    # Request threads (each with its database connection) per process for MCP, feedback,
    # Mediated Sign-In, browser sessions and the authority's routes (PoppyBodyLimit).
    "CHANNEL_THREADS": 8,
    # Events older than this many seconds may be pruned; None keeps everything.
    "RETENTION_SECONDS": None,
    # Import string of the token verifier: callable({method, url, headers}) -> Principal.
    "AUTHENTICATE": None,
    # The fake verifier (poppy_django.verifier.fake) trusts any PoppyFake header: it runs
    # only with DEBUG on, unless this opt-in names it (tests of the shipped production mode).
    "ALLOW_FAKE_VERIFIER_WITHOUT_DEBUG": False,
    # The Poppy issuer (authorization server) URL; an https issuer upgrades the public URL.
    "ISSUER": None,
    # The default DPoP/Session Token verifier's options (see docs/settings.md).
    "TOKENS": {},
    # The development authority (example project and tests only; refused in production).
    "DEV_AUTHORITY": False,
    # Import string of session_status(principal) -> bool (False: the session has ended and
    # the token is refused), consulted after a token verifies; None: sessions are not checked.
    "SESSION_STATUS": None,
    # The most seconds an answer of SESSION_STATUS is used per session id after it was given
    # (shared through Django's default cache, remembered in each process until then).
    "SESSION_STATUS_CACHE_SECONDS": 5.0,
    # poppy.json: organization and extra fields of the discovery document.
    "DISCOVERY": {},
    # Import string of actor_for(principal, default) -> Actor | None.
    "ACTOR_FOR": None,
    # Import string of the turn executor class.
    "EXECUTOR": "poppy_django.executors.ThreadExecutor",
    # Threads per process for turns' blocking work (claims, commits, sync tools, actions),
    # each with one database connection: the in-process executor's and each Celery worker
    # process's turn engine (docs/concepts.md).
    "EXECUTOR_THREADS": 8,
    # Turns one process keeps in flight at once (awaiting their model on its event loop);
    # past it a Celery task waits for a place (its worker takes no more messages) and an
    # embedded dispatch waits in the engine's queue.
    "TURNS_IN_FLIGHT": 200,
    # "approve-delegated" (the token's scopes approve actions) or "reject".
    "ACTIONS": "approve-delegated",
    # The Operations extension v1 (docs/operations-extension.md): off by default; a dict
    # turns it on ({"ENABLED": True, ...}; sub-keys in poppy_django.operations.options).
    "OPERATIONS": {},
    # The MCP server of the Company Agent's tools (docs/mcp.md): {"ENABLED": True, ...}.
    "MCP": {},
    # Overrides of DEFAULT_TEXTS.
    "TEXTS": {},
    # Import string of format_action(action: dict, texts: dict) -> str.
    "ACTION_FORMATTER": "poppy_django.agent.outcomes.format_action",
    # Import strings of the handoff hooks: request, message, cancel, assign (docs/settings.md).
    "HANDOFF_HOOKS": {},
    # When people take handoffs: {"TIME_ZONE": "Europe/Paris", "HOURS": {"mon-fri":
    # "09:00-17:30", "sat": "10:00-13:00, 14:00-16:00"}, "CLOSED_DATES": ["2026-12-25"]};
    # outside them the default request hook answers unavailable. None: always open.
    "OFFICE_HOURS": None,
    # A staff member none of whose desk pages was open for this long is away (a desk page
    # renews their presence as it loads, when its stream connects and every 30 s); no one
    # available: handoffs are unavailable.
    "STAFF_AWAY_AFTER_SECONDS": 90.0,
    # A handoff nobody joins within this many seconds goes back to the Company Agent (the
    # workers' sweep), its reason told to the personal agent. None: it waits for a person.
    "HANDOFF_MAX_WAIT_SECONDS": 600.0,
    # The share of HANDOFF_MAX_WAIT_SECONDS after which the desk warns that a handoff is
    # about to go back (its assignee by a notification, everyone in the queue).
    "HANDOFF_WARN_AT": 0.8,
    # How many conversations one staff member handles at once (waiting for them or held):
    # the assign hook gives none past it. Each staff member's own in the admin (Staff
    # presence) overrides it. None: no limit.
    "DESK_CAPACITY": 5,
    # The Django groups that are teams on the desk (a team queue, transfer to a team,
    # routing within it): a list of group names. [] : no teams.
    "DESK_TEAMS": [],
    # Import string of values(conversation) -> {"name": ..., "order": ...}: what canned
    # replies' placeholders say in a conversation (None or "" where unknown).
    "CANNED_REPLY_VALUES": "poppy_django.staff.canned.values_from_context",
    # Tags the Company Agent's turns put on conversations for the desk: {"refund": ["refund",
    # "money back"]} tags a conversation "refund" when a customer's message a turn answers
    # says one of those words or phrases (whole words, any case).
    "TAG_RULES": {},
    # After a person gives a conversation back to the Company Agent, ask the customer how
    # they rate the help (a csat_survey component; TEXTS["csat_question"]).
    "CSAT_SURVEY": False,
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
    # The newest agent-thread entries a turn shows the model (older ones stay stored); also
    # the most messages a new thread's sign-in transcript quotes.
    "THREAD_HISTORY_ENTRIES": 200,
    # How often each worker (and the embedded executor's process) takes up conversations
    # left working by a dead writer; None turns the in-process recovery off.
    "SWEEP_SECONDS": 5.0,
    # SSE: a keep-alive comment this often, and the longest a stream stays open.
    "STREAM_KEEPALIVE_SECONDS": 15.0,
    "STREAM_MAX_SECONDS": 300.0,
    # How often each process's watchdog checks, in one query for all its waiting readers,
    # for events whose wake-up was lost (a failed publish), and wakes those readers.
    "WAKE_FALLBACK_SECONDS": 10.0,
    # The first part of this deployment's namespace on a Redis server shared with others
    # (pub/sub channels are server-wide): "<prefix>:<EVENTSTREAM_REDIS db>".
    "REDIS_PREFIX": "poppy",
    # The endpoint's DRF classes (import strings): who is calling, may they, how often.
    "AUTHENTICATION_CLASSES": ["poppy_django.rest_framework.EndpointAuthentication"],
    "PERMISSION_CLASSES": ["poppy_django.permissions.IsPoppyCaller"],
    "THROTTLE_CLASSES": ["poppy_django.throttling.PoppyRateThrottle"],
    # Requests per personal agent and User (DRF rate strings; None: unlimited).
    "THROTTLE_RATES": {
        "conversation_start": "30/minute",
        "message": "120/minute",
        "handoff": "10/minute",
    },
    # Handoffs waiting for a person at once (queued) per personal agent's User and per
    # personal agent (client): past them a handoff is 429 too_many_requests. None: no bound.
    "MAX_WAITING_HANDOFFS_PER_USER": 2,
    "MAX_WAITING_HANDOFFS_PER_CLIENT": 20,
    # Concurrent waiting reads (streams and long-polls) per caller and per process.
    "MAX_WAITING_PER_CALLER": 100,
    "MAX_WAITING_PER_PROCESS": 10000,
    # A conversation's merged context, as JSON, stays within this many bytes.
    "MAX_CONTEXT_BYTES": 1024 * 1024,
    # Feedback reports (docs/channels.md): POST /poppy/feedback, listed in poppy.json.
    "FEEDBACK": False,
    # Reports one client's pairwise User may send per hour, across its Sessions, and one
    # client in all (past either: 429 rate_limited).
    "FEEDBACK_REPORTS_PER_HOUR": 10,
    "FEEDBACK_CLIENT_REPORTS_PER_HOUR": 1000,
    # The probes' paths (poppy_django.health_urls): liveness answers from the process alone,
    # readiness checks the database, migrations, cache, Redis and broker (docs/operations.md).
    "LIVENESS_PATH": "health/live",
    "READINESS_PATH": "health/ready",
    # Seconds readiness answers within, a check still running then (a hung database) being
    # "no answer": below the orchestrator's probe timeout, above the database pool's timeout.
    "READINESS_ANSWER_SECONDS": 6.0,
    # Where each turn engine's heartbeat file is touched (the worker probe reads them, on
    # the same host); None: "poppy-heartbeats" in the system's temporary directory.
    "HEARTBEAT_DIR": None,
    # Import string of cost(model, input_tokens, output_tokens) -> float | None: what a model
    # call cost, added up in the poppy.model.cost metric by model; None: no cost metric.
    "MODEL_COST": None,
    # Where poppy_django.health_urls serves this host's metrics to Prometheus (the
    # prometheus_multiprocess exporter's files); None: not served.
    "METRICS_PATH": None,
    # True: each process installs the OpenTelemetry SDK at start-up as the standard OTEL_*
    # variables say (poppy_django.observe.sdk); False: the deployment does, or none runs.
    "OPENTELEMETRY": False,
    # True: an endpoint request's W3C traceparent is its span's parent (the caller's trace
    # goes on here, sampled as the caller said); False: the span starts a trace of its own,
    # linked to the caller's. Personal agents are outside callers: they choose neither our
    # trace ids nor which of our requests are sampled unless the deployment trusts them.
    "TRUST_TRACEPARENT": False,
}

T = TypeVar("T")


class Setting(Generic[T]):
    """One ``POPPY`` key as a typed attribute: parsed at first use, cached until a reload.

    A non-data descriptor: the parsed value is stored in the instance's ``__dict__`` under
    the same name, so later reads are plain attribute reads; :meth:`PoppySettings.reload`
    clears them.
    """

    def __init__(self, parse: Callable[[str, Any], T]) -> None:
        self.parse = parse
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type) -> Setting[T]: ...
    @overload
    def __get__(self, instance: TypedSettings, owner: type) -> T: ...
    def __get__(self, instance: TypedSettings | None, owner: type) -> Setting[T] | T:
        if instance is None:
            return self
        value = self.parse(instance.label(self.name), instance.raw(self.name))
        instance.__dict__[self.name] = value
        return value


# -- parsers: (label, configured value) -> typed value, or ImproperlyConfigured naming the key.
# The label is how the message names the key: ``POPPY['PATH']``, ``POPPY_AUTHORITY['CLIENTS']``.


def _wrong(name: str, expected: str, value: Any) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"{name} must be {expected}, not {value!r}.")


def text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _wrong(name, "a string", value)
    return value


def optional_text(name: str, value: Any) -> str | None:
    return None if value is None else text(name, value)


def number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _wrong(name, "a number", value)
    return float(value)


def optional_number(name: str, value: Any) -> float | None:
    return None if value is None else number(name, value)


def integer(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _wrong(name, "an integer", value)
    return value


def optional_integer(name: str, value: Any) -> int | None:
    return None if value is None else integer(name, value)


def fraction(name: str, value: Any) -> float:
    """A number between 0 and 1 (a share of something)."""
    parsed = number(name, value)
    if not 0 <= parsed <= 1:
        raise _wrong(name, "a number from 0 to 1", value)
    return parsed


def optional_mapping(name: str, value: Any) -> dict[str, Any] | None:
    return None if value is None else mapping(name, value)


def flag(name: str, value: Any) -> bool:
    return bool(value)


def opt_in(name: str, value: Any) -> bool:
    """An explicit opt-in to something unsafe: only ``True`` itself counts (not ``"yes"``)."""
    return value is True


def mapping(name: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _wrong(name, "a dict", value)
    return dict(value)


def items(name: str, value: Any) -> list[Any]:
    """A list or tuple (of import strings or classes, for the DRF class lists)."""
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise _wrong(name, "a list", value)
    return list(value)


def texts(name: str, value: Any) -> list[str]:
    """A list of strings (import paths)."""
    parsed = items(name, value)
    for index, item in enumerate(parsed):
        text(f"{name}[{index}]", item)
    return parsed


def texts_by_name(name: str, value: Any) -> dict[str, str]:
    parsed = mapping(name, value)
    for key, item in parsed.items():
        text(f"{name}[{key!r}]", item)
    return parsed


def model_choice(name: str, value: Any) -> str | tuple[str, ...]:
    """A model name, or a fallback chain of them (a list: the first that answers)."""
    if isinstance(value, str):
        return text(name, value)
    chain = tuple(texts(name, value))
    if not chain:
        raise _wrong(name, "a model name or a non-empty list of model names", value)
    return chain


def model_choices_by_name(name: str, value: Any) -> dict[str, str | tuple[str, ...]]:
    return {
        key: model_choice(f"{name}[{key!r}]", item) for key, item in mapping(name, value).items()
    }


def flag_or_options(name: str, value: Any) -> bool | dict[str, Any]:
    """``DEV_AUTHORITY``: on/off, or a dict of its options (on)."""
    return mapping(name, value) if isinstance(value, Mapping) else bool(value)


def tag_rules(name: str, value: Any) -> dict[str, re.Pattern[str]]:
    """``TAG_RULES``: each tag's words and phrases as one case-insensitive pattern of whole
    words."""
    rules: dict[str, re.Pattern[str]] = {}
    for tag, words in mapping(name, value).items():
        if not isinstance(tag, str) or not TAG_NAME.fullmatch(tag):
            raise _wrong(f"{name} key", "a tag name (lower case letters, digits, - and _)", tag)
        phrases = [word.strip() for word in texts(f"{name}[{tag!r}]", words) if word.strip()]
        if not phrases:
            raise _wrong(f"{name}[{tag!r}]", "a non-empty list of words or phrases", words)
        alternatives = "|".join(re.escape(phrase) for phrase in phrases)
        rules[tag] = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)
    return rules


def imported(name: str, value: Any) -> Any:
    """An import string (or the object itself) resolved once; None stays None."""
    if value is None or callable(value):
        return value
    if not isinstance(value, str):
        raise ImproperlyConfigured(f"{name} must be an import string or a callable.")
    try:
        return import_string(value)
    except ImportError as exc:
        raise ImproperlyConfigured(f"{name} = {value!r} cannot be imported: {exc}") from exc


def imported_map(name: str, value: Any) -> dict[str, Any]:
    return {key: imported(f"{name}[{key!r}]", item) for key, item in mapping(name, value).items()}


class Executor(Protocol):
    """What ``POPPY["EXECUTOR"]`` names: where turns run (see :mod:`poppy_django.executors`)."""

    def dispatch(self, conversation_id: str) -> None: ...


class TypedSettings:
    """Typed, cached access to one settings dict: one :class:`Setting` attribute per key.

    The base of ``POPPY`` (:class:`PoppySettings`) and ``POPPY_AUTHORITY``
    (:class:`poppy_django.authority.conf.AuthoritySettings`): the unknown-key rule, the
    defaults and the reload live here once. An unknown key raises an error naming it, so a
    typo fails loudly at first use.
    """

    #: The Django setting's name (``settings.POPPY``).
    SETTING = ""
    #: Every key with its default.
    DEFAULTS: Mapping[str, Any] = {}

    def __init__(self, user_settings: Mapping[str, Any] | None = None) -> None:
        self._explicit = user_settings

    def label(self, name: str) -> str:
        """How messages name a key: ``POPPY['PATH']``."""
        return f"{self.SETTING}[{name!r}]"

    @functools.cached_property
    def _user(self) -> dict[str, Any]:
        if self._explicit is not None:
            raw = dict(self._explicit)
        else:
            raw = dict(getattr(settings, self.SETTING, {}) or {})
        unknown = unknown_keys(self.SETTING, raw, self.DEFAULTS)
        if unknown:
            raise ImproperlyConfigured(unknown)
        return raw

    def raw(self, name: str) -> Any:
        """The configured value as written (for checks and docs)."""
        if name not in self.DEFAULTS:
            raise AttributeError(f"Unknown {self.SETTING} setting: {name!r}")
        return self._user.get(name, self.DEFAULTS[name])

    def reload(self) -> None:
        for key in list(self.__dict__):
            if key != "_explicit":  # the constructor's argument, not a cached value
                delattr(self, key)


class PoppySettings(TypedSettings):
    """Typed, cached access to ``settings.POPPY``: one attribute per key (see DEFAULTS)."""

    SETTING = "POPPY"
    DEFAULTS = DEFAULTS

    BASE_URL = Setting(optional_text)
    PATH = Setting(text)
    AGENT = Setting(text)
    MODEL = Setting(model_choice)
    MODELS = Setting(model_choices_by_name)
    WAIT_MAX_SECONDS = Setting(number)
    PAGE_SIZE = Setting(integer)
    TAIL_MAX_BYTES = Setting(integer)
    MAX_BODY_BYTES = Setting(integer)
    #: Route kind ("mcp", "feedback", ...) -> bytes, merged over the defaults.
    BODY_LIMITS = Setting(mapping)
    BODY_READ_SECONDS = Setting(number)
    CHANNEL_THREADS = Setting(integer)
    RETENTION_SECONDS = Setting(optional_number)
    #: :class:`poppy_django.verifier.principal.Authenticate` or None.
    AUTHENTICATE = Setting(imported)
    ALLOW_FAKE_VERIFIER_WITHOUT_DEBUG = Setting(opt_in)
    ISSUER = Setting(optional_text)
    #: The dict as configured; :attr:`token_options` is the parsed form.
    TOKENS = Setting(mapping)
    DEV_AUTHORITY = Setting(flag_or_options)
    #: :class:`poppy_django.verifier.principal.SessionStatus` or None.
    SESSION_STATUS = Setting(imported)
    SESSION_STATUS_CACHE_SECONDS = Setting(number)
    DISCOVERY = Setting(mapping)
    #: :class:`poppy_django.verifier.principal.ActorFor` or None.
    ACTOR_FOR = Setting(imported)
    #: :class:`poppy_django.agent.registry.AgentFor` or None.
    AGENT_FOR = Setting(imported)
    EXECUTOR: Setting[Executor] = Setting(imported)
    EXECUTOR_THREADS = Setting(integer)
    TURNS_IN_FLIGHT = Setting(integer)
    ACTIONS = Setting(text)
    OPERATIONS = Setting(mapping)
    MCP = Setting(mapping)
    TEXTS = Setting(texts_by_name)
    #: callable(action: dict, texts: dict) -> str.
    ACTION_FORMATTER: Setting[Callable[[dict[str, Any], dict[str, str]], str]] = Setting(imported)
    #: By name: the Protocols of :mod:`poppy_django.handoff` (``RequestHook``, ``AssignHook``,
    #: ``MessageHook``, ``CancelHook``; ``DirectHook``), each typed where it is called.
    HANDOFF_HOOKS = Setting(imported_map)
    DIRECT_HOOKS = Setting(imported_map)
    #: The dict as configured (None: always open); :mod:`poppy_django.staff.office_hours`
    #: parses it.
    OFFICE_HOURS = Setting(optional_mapping)
    STAFF_AWAY_AFTER_SECONDS = Setting(number)
    HANDOFF_MAX_WAIT_SECONDS = Setting(optional_number)
    HANDOFF_WARN_AT = Setting(fraction)
    DESK_CAPACITY = Setting(optional_integer)
    DESK_TEAMS = Setting(texts)
    #: :class:`poppy_django.staff.canned.CannedReplyValues` or None.
    CANNED_REPLY_VALUES = Setting(imported)
    #: Tag name -> its words and phrases as one pattern.
    TAG_RULES = Setting(tag_rules)
    CSAT_SURVEY = Setting(flag)
    LEASE_SECONDS = Setting(number)
    HEARTBEAT_SECONDS = Setting(number)
    STREAM_KEEPALIVE_SECONDS = Setting(number)
    STREAM_MAX_SECONDS = Setting(number)
    WAKE_FALLBACK_SECONDS = Setting(number)
    REDIS_PREFIX = Setting(text)
    AUTHENTICATION_CLASSES = Setting(items)
    PERMISSION_CLASSES = Setting(items)
    THROTTLE_CLASSES = Setting(items)
    #: Route name -> DRF rate string ("30/minute"), or None: unlimited.
    THROTTLE_RATES = Setting(mapping)
    MAX_WAITING_PER_CALLER = Setting(integer)
    MAX_WAITING_HANDOFFS_PER_USER = Setting(optional_integer)
    MAX_WAITING_HANDOFFS_PER_CLIENT = Setting(optional_integer)
    MAX_WAITING_PER_PROCESS = Setting(integer)
    MAX_CONTEXT_BYTES = Setting(integer)
    FEEDBACK = Setting(flag)
    FEEDBACK_REPORTS_PER_HOUR = Setting(integer)
    FEEDBACK_CLIENT_REPORTS_PER_HOUR = Setting(integer)
    LIVENESS_PATH = Setting(text)
    READINESS_PATH = Setting(text)
    READINESS_ANSWER_SECONDS = Setting(number)
    HEARTBEAT_DIR = Setting(optional_text)
    #: callable(model, input_tokens, output_tokens) -> float | None.
    METRICS_PATH = Setting(optional_text)
    OPENTELEMETRY = Setting(flag)
    TRUST_TRACEPARENT = Setting(flag)
    MODEL_COST: Setting[Callable[[str, int, int], float | None] | None] = Setting(imported)
    TURN_TIMEOUT_SECONDS = Setting(number)
    TURN_MAX_ATTEMPTS = Setting(integer)
    THREAD_HISTORY_ENTRIES = Setting(integer)
    #: How often each worker sweeps for conversations left without a writer; None: never.
    SWEEP_SECONDS = Setting(optional_number)
    #: Middleware (import paths) the endpoint's requests skip (PoppyEndpointMiddleware).
    SKIP_MIDDLEWARE = Setting(texts)
    #: Hook-only middleware (import paths) run on the event loop on the endpoint's paths.
    NONBLOCKING_MIDDLEWARE = Setting(texts)

    @functools.cached_property
    def token_options(self) -> TokenOptions:
        """``TOKENS`` parsed and checked (the one place it is): the default verifier's options."""
        return parse_options(self.TOKENS)

    @functools.cached_property
    def texts(self) -> dict[str, str]:
        return {**DEFAULT_TEXTS, **self.TEXTS}


def _declared(parse: Callable[[str, Any], Any]) -> frozenset[str]:
    return frozenset(
        name
        for name, value in vars(PoppySettings).items()
        if isinstance(value, Setting) and value.parse is parse
    )


#: Keys whose value is an import string (checked by E001), and mappings of them.
IMPORT_STRINGS = _declared(imported)
IMPORT_STRING_MAPS = _declared(imported_map)

poppy_settings = PoppySettings()


#: ``DEBUG`` as tests set it (``override_settings``, pytest-django's ``settings``), innermost last.
_debug_overrides: list[bool] = []


@receiver(setting_changed)
def _reload_on_change(
    *, setting: str, value: Any = None, enter: bool = True, **kwargs: Any
) -> None:
    if setting == "POPPY":
        poppy_settings.reload()
    elif setting == "DEBUG":
        if enter:
            _debug_overrides.append(bool(value))
        elif _debug_overrides:
            _debug_overrides.pop()


def debug_configured() -> bool:
    """``DEBUG`` as the project's settings set it, which a test run does not change.

    Django's test runner and pytest-django run every test with ``DEBUG=False`` whatever the
    settings say (``django.test.utils.setup_test_environment`` assigns it, with no signal).
    What stands for "this project is in production" (the checks that would stop an
    adopter's test run, the development authority's refusal) reads this instead: the settings
    module's ``DEBUG`` or the live value, unless a test sets ``DEBUG`` itself, which
    ``setting_changed`` reports. A production project is judged as before: its settings say
    ``DEBUG = False``.
    """
    if _debug_overrides:
        return _debug_overrides[-1]
    if settings.DEBUG:
        return True
    # The module Django read the settings from (override_settings hides SETTINGS_MODULE).
    module = os.environ.get(ENVIRONMENT_VARIABLE)
    if not module:
        return False  # settings.configure(): the live value is the project's
    return getattr(importlib.import_module(module), "DEBUG", False) is True


def in_test_run() -> bool:
    """Whether this process runs a test suite (Django's runner, pytest-django).

    Both call Django's ``setup_test_environment``, which gives ``django.core.mail`` the
    ``outbox`` its documentation describes for tests, and ``teardown_test_environment`` takes
    it away again: the one public mark a test run leaves.
    """
    from django.core import mail

    return hasattr(mail, "outbox")


def organization_name() -> str:
    """The company's name for pages and mails a person reads (``DISCOVERY["ORGANIZATION"]``'s
    ``name``), or "this company" where the project set none."""
    organization = (poppy_settings.DISCOVERY or {}).get("ORGANIZATION") or {}
    return str(organization.get("name") or "this company")


def sub_settings(name: str, keys: Iterable[str]) -> dict[str, Any]:
    """``POPPY[name]``, a dict of a part's own keys, as configured (a copy); a key not among
    ``keys`` is refused with the one unknown-key error, at each read (``override_settings``)."""
    raw = dict(getattr(poppy_settings, name) or {})
    unknown = unknown_keys(f'POPPY["{name}"]', raw, sorted(keys))
    if unknown:
        raise ImproperlyConfigured(unknown)
    return raw


def hook(group: str, name: str) -> Any:
    """A configured hook (``HANDOFF_HOOKS`` / ``DIRECT_HOOKS``) or None: typed by the
    caller's Protocol (:mod:`poppy_django.handoff`), which this layer cannot import."""
    hooks: dict[str, Any] = getattr(poppy_settings, group)
    return hooks.get(name)


@functools.cache
def endpoint_prefix() -> str:
    """``"/" + POPPY["PATH"]``: where :mod:`poppy_django.urls` mounts the endpoint.

    Read once per process, because the URLconf is built once at import; the middleware
    reads this same value, so it can never route a path the URLconf does not serve. It reads
    the one key without validating the whole dict: URL checks import the URLconf, and a typo
    elsewhere in ``POPPY`` must surface as check ``poppy_django.E004``, not an import error.
    """
    configured = getattr(settings, "POPPY", None)
    path = configured.get("PATH", DEFAULTS["PATH"]) if isinstance(configured, Mapping) else None
    return "/" + text("POPPY['PATH']", DEFAULTS["PATH"] if path is None else path).strip("/")
