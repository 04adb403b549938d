"""System checks with stable ids (``poppy_django.E001`` ...), registered in ``ready()``.

The ids are a contract: they are listed in ``docs/settings.md`` and each one is tested in
``tests/ops/test_checks.py``. ``E0xx``/``W0xx`` are the core settings (this module);
``E1xx``/``W1xx`` are the auth settings (:mod:`poppy_django.auth.checks`), run here too but
only once the ``POPPY`` dict itself is readable.

A broken ``POPPY`` dict (an unknown key, not a dict) is reported as ``E004`` instead of the
``ImproperlyConfigured`` that reading it raises everywhere else, so ``manage.py check``
names the problem rather than crashing.
"""

from __future__ import annotations

import importlib.util
import string
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from poppy_django.conf import (
    DEFAULT_TEXTS,
    DEFAULTS,
    IMPORT_STRING_MAPS,
    IMPORT_STRINGS,
    poppy_settings,
    unknown_keys,
)

#: A retention shorter than this prunes events a personal agent may still hold a cursor to
#: (it comes back after a pause, or a stream reconnects with Last-Event-ID): W004.
MIN_RETENTION_SECONDS = 3600.0

#: The numeric settings and the range each must be in: (minimum, maximum, integer).
#: The wire pins WAIT_MAX_SECONDS at 30 at most; MAX_BODY_BYTES must fit a message.
RANGES: dict[str, tuple[float, float | None, bool]] = {
    "WAIT_MAX_SECONDS": (0.0, 30.0, False),
    "PAGE_SIZE": (1, 1000, True),
    "MAX_BODY_BYTES": (1024, 16 * 1024 * 1024, True),
    "EXECUTOR_THREADS": (1, 256, True),
    "TURNS_IN_FLIGHT": (1, 100_000, True),
    "THREAD_HISTORY_ENTRIES": (1, None, True),
    "LEASE_SECONDS": (1.0, None, False),
    "HEARTBEAT_SECONDS": (0.1, None, False),
    "STREAM_KEEPALIVE_SECONDS": (1.0, None, False),
    "STREAM_MAX_SECONDS": (1.0, None, False),
    "WAKE_FALLBACK_SECONDS": (0.1, None, False),
    "RETENTION_SECONDS": (0.0, None, False),
}
#: Exclusive lower bounds (a zero cap or zero-second wait loop is never meant).
_EXCLUSIVE_MINIMUM = frozenset({"WAIT_MAX_SECONDS"})

#: The sub-keys of the dict settings (TOKENS is checked by E105).
HOOK_NAMES: dict[str, frozenset[str]] = {
    "HANDOFF_HOOKS": frozenset({"request", "message", "cancel"}),
    "DIRECT_HOOKS": frozenset({"opened", "closed"}),
}
#: The fields each text is formatted with (texts not listed are used as written).
TEXT_FIELDS: dict[str, frozenset[str]] = {
    "handoff_unavailable": frozenset({"reason"}),
    "sign_in_required": frozenset({"scope"}),
    "insufficient_scope": frozenset({"scope"}),
    "operation_revised": frozenset({"summary"}),
}
#: What the default ACTION_FORMATTER formats the action_* texts with.
ACTION_TEXT_FIELDS = frozenset({"summary", "summary_lower", "tool", "error"})
DEFAULT_ACTION_FORMATTER = DEFAULTS["ACTION_FORMATTER"]

CELERY_EXECUTOR = "poppy_django.executors.CeleryExecutor"
THREAD_EXECUTOR = "poppy_django.executors.ThreadExecutor"

Messages = list[checks.CheckMessage]


def _id(number: str) -> str:
    return f"poppy_django.{number}"


# -- the POPPY dict itself --------------------------------------------------------------


def poppy_dict_problem() -> checks.CheckMessage | None:
    """E004 when ``settings.POPPY`` cannot be read at all (not a dict, unknown keys)."""
    raw = getattr(settings, "POPPY", None)
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        return checks.Error(
            f"settings.POPPY must be a dict, not {type(raw).__name__}.", id=_id("E004")
        )
    unknown = unknown_keys("POPPY", raw, DEFAULTS)
    if unknown:
        return checks.Error(
            unknown, hint="The settings page of the documentation lists them.", id=_id("E004")
        )
    return None


def _unknown_sub_keys() -> Messages:
    """E004 for typos inside the dict-valued settings, which would be silently ignored."""
    from poppy_django.discovery import DISCOVERY_KEYS

    known: dict[str, Iterable[str]] = {
        "DISCOVERY": DISCOVERY_KEYS,
        "TEXTS": DEFAULT_TEXTS,
        **HOOK_NAMES,
        "MODELS": (),  # any agent name: checked by W006
    }
    errors: Messages = []
    for name, allowed in known.items():
        value = poppy_settings.raw(name)
        if value is None:
            value = {}
        if not isinstance(value, Mapping):
            errors.append(checks.Error(f'POPPY["{name}"] must be a dict.', id=_id("E004")))
            continue
        if name == "MODELS":
            continue
        unknown = unknown_keys(f'POPPY["{name}"]', value, sorted(allowed))
        if unknown:
            errors.append(checks.Error(unknown, id=_id("E004")))
    return errors


# -- import strings, values and ranges ---------------------------------------------------


def _import_errors() -> Messages:
    """E001 for every import-string setting that cannot be imported."""
    errors: Messages = []
    for name in sorted(IMPORT_STRINGS | IMPORT_STRING_MAPS):
        if name in IMPORT_STRING_MAPS and not isinstance(poppy_settings.raw(name), Mapping | None):
            continue  # a hook map that is not a dict: E004 says so
        try:
            getattr(poppy_settings, name)
        except ImproperlyConfigured as exc:
            errors.append(checks.Error(str(exc), id=_id("E001")))
    return errors


def _number(name: str) -> float | None:
    """The setting as a number, or None when it is not one (E005 reports it)."""
    value = poppy_settings.raw(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _range_errors() -> Messages:
    """E005 for numeric settings of the wrong type or outside their range."""
    errors: Messages = []
    for name, (low, high, integer) in RANGES.items():
        value = poppy_settings.raw(name)
        if name == "RETENTION_SECONDS" and value is None:
            continue
        number = _number(name)
        kind = "an integer" if integer else "a number"
        bounds = f">= {low:g}" if name not in _EXCLUSIVE_MINIMUM else f"> {low:g}"
        if high is not None:
            bounds += f" and <= {high:g}"
        wrong = (
            number is None
            or (integer and not isinstance(value, int))
            or number < low
            or (name in _EXCLUSIVE_MINIMUM and number <= low)
            or (high is not None and number > high)
        )
        if wrong:
            errors.append(
                checks.Error(
                    f'POPPY["{name}"] = {value!r} is out of range: {kind} {bounds}.',
                    hint=f"The default is {DEFAULTS[name]!r}.",
                    id=_id("E005"),
                )
            )
    return errors


def _text_errors() -> Messages:
    """E008: a text override that the app could not format (unknown or positional field)."""
    texts = poppy_settings.raw("TEXTS") or {}
    if not isinstance(texts, Mapping):
        return []
    default_formatter = poppy_settings.raw("ACTION_FORMATTER") == DEFAULT_ACTION_FORMATTER
    errors: Messages = []
    for key, text in texts.items():
        if key not in DEFAULT_TEXTS:
            continue  # E004
        if not isinstance(text, str):
            errors.append(
                checks.Error(f'POPPY["TEXTS"]["{key}"] must be a string.', id=_id("E008"))
            )
            continue
        if key.startswith("action_"):
            if not default_formatter:
                continue  # your formatter decides which fields it fills in
            fields = ACTION_TEXT_FIELDS
        elif key in TEXT_FIELDS:
            fields = TEXT_FIELDS[key]
        else:
            continue  # written as is, never formatted
        problem = _format_problem(text, fields)
        if problem:
            errors.append(
                checks.Error(
                    f'POPPY["TEXTS"]["{key}"] cannot be formatted: {problem}.',
                    hint=f"Available fields: {', '.join('{' + f + '}' for f in sorted(fields))}.",
                    id=_id("E008"),
                )
            )
    return errors


def _format_problem(text: str, fields: frozenset[str]) -> str | None:
    try:
        used = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        return str(exc)
    for name in used:
        root = name.split(".")[0].split("[")[0]
        if root not in fields:
            return f"unknown field {{{name}}}" if root else "a positional field {}"
    return None


# -- the executor, fan-out and models ---------------------------------------------------


def _executor_is(path: str) -> bool:
    """Whether ``POPPY["EXECUTOR"]`` is (a subclass of) the class at ``path``."""
    raw = poppy_settings.raw("EXECUTOR")
    if raw == path:
        return True
    try:
        configured = poppy_settings.EXECUTOR
    except ImproperlyConfigured:
        return False  # E001
    from django.utils.module_loading import import_string

    target = import_string(path)
    return isinstance(configured, type) and issubclass(configured, target)


def celery_broker_url() -> str | None:
    """The broker Celery would use: ``CELERY_BROKER_URL`` (setting or environment), else the
    current Celery app's ``broker_url``."""
    for name in ("CELERY_BROKER_URL", "BROKER_URL"):
        value = getattr(settings, name, None)
        if value:
            return str(value)
    try:
        from celery import current_app

        url = current_app.conf.broker_url
    except Exception:  # no Celery app configured in this process
        return None
    return str(url) if url else None


def _fanout_is_redis() -> bool:
    return bool(getattr(settings, "EVENTSTREAM_REDIS", None))


def _production_mode_errors() -> Messages:
    """E006, W005: turns in Celery need a broker, and Redis for wake-ups and deltas."""
    if not _executor_is(CELERY_EXECUTOR):
        return []
    errors: Messages = []
    if not celery_broker_url():
        errors.append(
            checks.Error(
                "Turns run in Celery workers but no Celery broker is configured: every turn "
                "dispatch fails and conversations stay 'working'.",
                hint="Set CELERY_BROKER_URL (e.g. your Redis URL) and load it in your Celery app "
                "with app.config_from_object('django.conf:settings', namespace='CELERY').",
                id=_id("E006"),
            )
        )
    if not _fanout_is_redis():
        errors.append(
            checks.Warning(
                "Turns run in Celery workers but EVENTSTREAM_REDIS is unset: their wake-ups "
                "and text deltas never reach the web processes, so readers answer only on the "
                "fallback re-read (WAKE_FALLBACK_SECONDS) and streams get no text-delta.",
                hint="Set EVENTSTREAM_REDIS to your Redis connection ({'host': ..., 'port': ...}).",
                id=_id("W005"),
            )
        )
    return errors


def _agent_errors() -> Messages:
    """E007: the agent POPPY["AGENT"] names is not registered; W006: a model cannot be built."""
    from poppy_django.agent import registry

    errors: Messages = []
    agents = registry.registered()
    name = poppy_settings.raw("AGENT")
    if name not in agents:
        errors.append(
            checks.Error(
                f'POPPY["AGENT"] = {name!r} is not a registered Company Agent '
                f"(registered: {', '.join(sorted(agents)) or 'none'}).",
                hint="Register it from your AppConfig.ready(): "
                'poppy_django.agent.register(CompanyAgent(name="...", tools=[...])).',
                id=_id("E007"),
            )
        )
    models = poppy_settings.raw("MODELS") or {}
    if not isinstance(models, Mapping):
        return errors
    for agent_name in sorted(set(models) - set(agents)):
        errors.append(
            checks.Warning(
                f'POPPY["MODELS"] names {agent_name!r}, which is not a registered Company Agent.',
                id=_id("W006"),
            )
        )
    names = {str(poppy_settings.raw("MODEL")), *map(str, models.values())}
    errors.extend(_model_errors(sorted(names)))
    return errors


def _model_errors(names: list[str]) -> Messages:
    from poppy_django.agent.model_choice import SCRIPTED, build_model, is_scripted

    errors: Messages = []
    for model_name in names:
        if model_name == SCRIPTED:
            continue
        try:
            build_model(model_name)
        except ImproperlyConfigured as exc:
            errors.append(
                checks.Warning(
                    f"{exc} Turns answered by it fail in this process.",
                    hint=_model_hint(is_scripted(model_name)),
                    id=_id("W006"),
                )
            )
    return errors


def _model_hint(scripted: bool) -> str:
    """What to do, by cause: the rules' path, the llm extra, or the provider's side."""
    if scripted:
        return (
            'Name a poppy_django.agent.scripted.Script: "scripted:yourapp.agent.SCRIPT" '
            "(see the Company Agent page of the docs)."
        )
    if importlib.util.find_spec("pydantic_ai") is None:
        return (
            "Install the llm extra (pip install 'poppy-django[llm]') and the provider's "
            "package, e.g. 'pydantic-ai-slim[openai]'."
        )
    return (
        "Install the provider's package (e.g. 'pydantic-ai-slim[openai]') and give its API key "
        "(e.g. OPENAI_API_KEY) to the environment of every process that runs turns: the "
        "Celery workers, or the web process in the embedded mode."
    )


# -- the check ----------------------------------------------------------------------------


def check_settings(app_configs: Any = None, **kwargs: Any) -> Messages:
    """Every core check; a broken POPPY dict is reported alone (E004)."""
    problem = poppy_dict_problem()
    if problem is not None:
        return [problem]
    errors: Messages = [*_unknown_sub_keys(), *_import_errors(), *_range_errors()]
    if poppy_settings.raw("AUTHENTICATE") is None:
        errors.append(
            checks.Warning(
                "No token verifier is configured: the endpoint answers 501 not_implemented.",
                hint='Set POPPY["AUTHENTICATE"] (e.g. "poppy_django.auth.dpop.verify").',
                id=_id("W001"),
            )
        )
    if poppy_settings.raw("ACTIONS") not in ("approve-delegated", "reject"):
        errors.append(
            checks.Error(
                'POPPY["ACTIONS"] must be "approve-delegated" or "reject".', id=_id("E002")
            )
        )
    heartbeat, lease = _number("HEARTBEAT_SECONDS"), _number("LEASE_SECONDS")
    if heartbeat is not None and lease is not None and heartbeat >= lease:
        errors.append(
            checks.Error(
                'POPPY["HEARTBEAT_SECONDS"] must be shorter than POPPY["LEASE_SECONDS"].',
                hint="A third of the lease is a good heartbeat.",
                id=_id("E003"),
            )
        )
    if not settings.USE_TZ:
        errors.append(
            checks.Error(
                "USE_TZ is False: event created_at times would carry no time zone, which "
                "the wire requires (ISO 8601 UTC).",
                hint="Set USE_TZ = True (Django's default).",
                id=_id("E009"),
            )
        )
    errors.extend(_retention_warnings())
    errors.extend(_text_errors())
    errors.extend(_production_mode_errors())
    errors.extend(_agent_errors())
    if not settings.DEBUG:
        errors.extend(_production_checks())
    return errors


def _retention_warnings() -> Messages:
    """W004: events pruned sooner than a reader can come back for them."""
    retention = _number("RETENTION_SECONDS")
    if poppy_settings.raw("RETENTION_SECONDS") is None or retention is None or retention < 0:
        return []
    stream_max = _number("STREAM_MAX_SECONDS") or 0.0
    window = max(stream_max, MIN_RETENTION_SECONDS)
    if retention >= window:
        return []
    return [
        checks.Warning(
            f'POPPY["RETENTION_SECONDS"] = {retention:g} is shorter than the resume window '
            f"({window:g} s: at least an hour, and at least STREAM_MAX_SECONDS): cursors and "
            "Last-Event-IDs that personal agents still hold would answer 410 cursor_expired.",
            hint=f"Keep events at least {MIN_RETENTION_SECONDS:g} seconds (days are usual).",
            id=_id("W004"),
        )
    ]


def _production_checks() -> Messages:
    """W002, W003, W007: what only matters with DEBUG=False."""
    errors: Messages = []
    if _executor_is(THREAD_EXECUTOR):
        errors.append(
            checks.Warning(
                "Turns run in in-process threads with DEBUG=False: one process only.",
                hint=f'Set POPPY["EXECUTOR"] = "{CELERY_EXECUTOR}".',
                id=_id("W002"),
            )
        )
    if not _fanout_is_redis() and not _executor_is(CELERY_EXECUTOR):  # else W005 says it
        errors.append(
            checks.Warning(
                "Wake-ups and text deltas stay in this process (EVENTSTREAM_REDIS is unset) "
                "with DEBUG=False: readers on other processes wait for the fallback re-read.",
                hint="Set EVENTSTREAM_REDIS to your Redis connection.",
                id=_id("W003"),
            )
        )
    base_url = poppy_settings.raw("BASE_URL")
    if isinstance(base_url, str) and not base_url.startswith("https://"):
        errors.append(
            checks.Warning(
                f'POPPY["BASE_URL"] = {base_url!r} is not https with DEBUG=False: personal '
                "agents refuse plain-http protocol URLs, and DPoP proofs name this URL.",
                hint="Serve the endpoint over TLS and set BASE_URL to its https:// origin.",
                id=_id("W007"),
            )
        )
    return errors


#: How long ``check --deploy`` waits for the broker to answer.
BROKER_CHECK_TIMEOUT = 2


def check_broker(app_configs: Any = None, **kwargs: Any) -> Messages:
    """W008 (``check --deploy``): this process cannot reach its Celery broker.

    A deploy check because it opens a connection: a wrong ``CELERY_BROKER_URL`` in the web
    process costs no message (the recovery sweep answers them) but makes every turn late.
    """
    if poppy_dict_problem() is not None or not _executor_is(CELERY_EXECUTOR):
        return []
    url = celery_broker_url()
    if not url:
        return []  # E006
    from celery import current_app

    from poppy_django.broker_health import consequence, redacted
    from poppy_django.observe import describe_failure

    try:
        with current_app.connection_for_write(url, connect_timeout=BROKER_CHECK_TIMEOUT) as conn:
            conn.ensure_connection(max_retries=1, timeout=BROKER_CHECK_TIMEOUT)
    except Exception as exc:
        return [
            checks.Warning(
                f"This process cannot reach its Celery broker {redacted(url)} "
                f"({describe_failure(exc)}): every turn dispatch fails, so {consequence()}.",
                hint="Set CELERY_BROKER_URL to the broker the workers use (the same Redis URL), "
                "and check that it is up and reachable from this machine.",
                id=_id("W008"),
            )
        ]
    return []


def check_auth(app_configs: Any = None, **kwargs: Any) -> Messages:
    """The auth checks (E1xx, W1xx), once the POPPY dict is readable (else E004 says why)."""
    if poppy_dict_problem() is not None:
        return []
    from poppy_django.auth.checks import (
        check_dev_authority,
        check_dpop_verifier,
        check_fake_verifier,
    )

    auth_checks: tuple[Callable[..., Messages], ...] = (
        check_dev_authority,
        check_dpop_verifier,
        check_fake_verifier,
    )
    return [message for check in auth_checks for message in check(app_configs, **kwargs)]


def register() -> None:
    """Called from ``PoppyDjangoConfig.ready()``: the core, the auth and the desk checks."""
    from poppy_django.desk.checks import check_channel_manager
    from poppy_django.discovery_rules import check_discovery

    checks.register(check_settings, checks.Tags.compatibility)
    checks.register(check_discovery, checks.Tags.compatibility)
    checks.register(check_auth, checks.Tags.security)
    checks.register(check_channel_manager, checks.Tags.security)
    checks.register(check_broker, checks.Tags.compatibility, deploy=True)
