"""Settings of the example project, from the environment.

- ``DATABASE_URL``: unset → SQLite under ``var/`` (the embedded default).
- ``DATABASE_POOL_MAX_SIZE`` (10), ``DATABASE_POOL_MIN_SIZE`` (1), ``DATABASE_POOL_TIMEOUT``
  (5 s), ``DATABASE_POOL_RECONNECT_TIMEOUT`` (10 s), ``DATABASE_CONNECT_TIMEOUT`` (3 s): each
  process's psycopg connection pool (docs/deployment.md#postgresql);
  ``DATABASE_POOL=0`` turns it off (a connection kept per thread, ``CONN_MAX_AGE`` 60 s).
- ``DATABASE_TRANSACTION_POOLING=1``: ``DATABASE_URL`` names a PgBouncer in transaction
  pooling mode (no server-side cursors; docs/deployment.md, "Behind PgBouncer").
- ``REDIS_URL``: unset → embedded mode (turns in in-process threads, in-process wake-ups);
  set → production mode (Celery workers, Redis fan-out and cache).
- ``POPPY_BASE_URL``: the public origin DPoP proofs name; ``POPPY_ORGANIZATION_DOMAIN``
  (``acme.example``): the organization's domain in ``poppy.json``, the host serving it.
- ``DJANGO_DEBUG``: default on in embedded mode, off in production mode (no debug pages).
- ``DJANGO_SECRET_KEY``: with DEBUG off and none given, a random key is made once under
  ``var/`` (shared by this machine's processes; give the same one to every machine). Never a
  published default.
- ``POPPY_DEV_AUTHORITY``: the development authority, on by default only with DEBUG on;
  ``POPPY_DEV_AUTHORITY=1`` is the explicit opt-in that runs it with DEBUG off too.
- ``POPPY_AUTHENTICATE``: the token verifier (default: the DPoP verifier); the fake one runs with
  DEBUG off only with ``POPPY_ALLOW_FAKE_VERIFIER=1`` (tests and benchmarks, never deployed).
- ``POPPY_REQUIRE_NONCE=1``: DPoP proofs must carry a server nonce (``TOKENS["REQUIRE_NONCE"]``).
- ``POPPY_OUTBOUND_ROUTES`` / ``POPPY_OUTBOUND_CA_FILE``: names the authority reaches through
  fixed routes, and a private CA for them (``example_project/outbound.py``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dj_database_url

from poppy_django.files import made_once

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("POPPY_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)

REDIS_URL = os.environ.get("REDIS_URL")
DEBUG = os.environ.get("DJANGO_DEBUG", "0" if REDIS_URL else "1") == "1"


def _made_once(name: str, make: Callable[[], bytes]) -> bytes:
    """The content of ``VAR_DIR/name``, made by ``make`` the first time (by one process)."""
    return made_once(VAR_DIR / name, make)


def _secret_key() -> str:
    """``DJANGO_SECRET_KEY``; with DEBUG on a fixed development key; else one made once here."""
    configured = os.environ.get("DJANGO_SECRET_KEY")
    if configured:
        return configured
    if DEBUG:
        return "example-project-debug-only-not-secret"
    return _made_once("django-secret-key", lambda: secrets.token_urlsafe(50).encode()).decode()


def _new_signing_key() -> bytes:
    """A P-256 private key as PEM: what the authorization server signs Session Tokens with."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,testserver").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_eventstream",
    "poppy_django",
    "example_project.shop",
]
# The Company's own authorization server (issuer of the Session Tokens). Its OAuth side runs
# where its extra (poppy-django[authority]: Authlib, httpx) is installed; without it only its
# development mode issues tokens (poppy_token; the package's no-extras test run).
AUTHORITY = all(importlib.util.find_spec(name) for name in ("authlib", "httpx"))
DEV_AUTHORITY = os.environ.get("POPPY_DEV_AUTHORITY", "1" if DEBUG else "0") == "1"
# The demo customers acct-1 and acct-2 with their published password (shop/demo_accounts.py):
# only while the project says it is a demo: on with DEBUG, else ACME_DEMO_ACCOUNTS=1.
ACME_DEMO_ACCOUNTS = os.environ.get("ACME_DEMO_ACCOUNTS", "1" if DEBUG else "0") == "1"
if ACME_DEMO_ACCOUNTS:
    # A demo has no mail server: what Acme e-mails (Mediated Sign-In's one-time codes) is
    # written under var/outbox/, one file a message, where whoever tries the demo reads it.
    # A deployment configures Django's e-mail settings (EMAIL_HOST, ...) instead.
    EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    EMAIL_FILE_PATH = str(VAR_DIR / "outbox")
if AUTHORITY or DEV_AUTHORITY:
    INSTALLED_APPS.insert(INSTALLED_APPS.index("example_project.shop"), "poppy_django.authority")

MIDDLEWARE = [
    # First: the endpoint's short path (no session/auth/CSRF/messages hops; JSON errors).
    "poppy_django.middleware.PoppyEndpointMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
if AUTHORITY:
    # Browser sessions: request.poppy, and a Session's sign-out ends its browser's session.
    MIDDLEWARE.insert(
        MIDDLEWARE.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1,
        "poppy_django.authority.website.BrowserSessionMiddleware",
    )

ROOT_URLCONF = "example_project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
ASGI_APPLICATION = "example_project.asgi.application"
WSGI_APPLICATION = "example_project.wsgi.application"

DATABASE_URL = os.environ.get("DATABASE_URL")
#: Each process's PostgreSQL connections, bounded whatever the route or the burst: Django's
#: psycopg pool (docs/deployment.md#postgresql), sized per process by these variables.
DATABASE_POOL = os.environ.get("DATABASE_POOL", "1") == "1"
if DATABASE_URL:
    DATABASES = {
        "default": dj_database_url.parse(
            DATABASE_URL,
            # The pool checks a connection before lending it (a restarted server's stale
            # ones are dropped), as Django checks a kept one at each request without it.
            conn_health_checks=True,
            # Behind PgBouncer in transaction pooling mode: no cursor outlives its transaction.
            disable_server_side_cursors=os.environ.get("DATABASE_TRANSACTION_POOLING") == "1",
        )
    }
    if DATABASE_POOL and DATABASES["default"]["ENGINE"].endswith("postgresql"):
        # A thread gives its connection back at the end of each request or job (Django
        # refuses persistent connections beside a pool).
        DATABASES["default"]["CONN_MAX_AGE"] = 0
        # Django's backend, whose check of a pooled connection waits at most connect_timeout
        # for the server (Django's own waits without end on a hung server): a request on a
        # hung database is answered 503 within that or the pool's timeout.
        DATABASES["default"]["ENGINE"] = "poppy_django.db.postgresql"
        # Seconds a new connection, or the check of a kept one, may take (libpq's option).
        DATABASES["default"].setdefault("OPTIONS", {})["connect_timeout"] = int(
            os.environ.get("DATABASE_CONNECT_TIMEOUT", "3")
        )
        DATABASES["default"]["OPTIONS"]["pool"] = {
            # Kept open while idle; opened on demand up to max_size, never more.
            "min_size": int(os.environ.get("DATABASE_POOL_MIN_SIZE", "1")),
            "max_size": int(os.environ.get("DATABASE_POOL_MAX_SIZE", "10")),
            # Seconds a request or job waits for a free connection; then the request is
            # answered 503 with Retry-After (never a 500), the job fails as the database's.
            "timeout": float(os.environ.get("DATABASE_POOL_TIMEOUT", "5")),
            # Seconds the pool keeps retrying a failed connection (backing off 1, 2, 4, 8 s…)
            # before a new request starts afresh: after a database outage the pool
            # connects again within about this long, not after its default 5 minutes'
            # back-off (a 100 s outage was answered 30 s after PostgreSQL came back).
            "reconnect_timeout": float(os.environ.get("DATABASE_POOL_RECONNECT_TIMEOUT", "10")),
        }
    else:
        # Without the pool (bench/connection_burst.py's comparison): a connection per thread.
        DATABASES["default"]["CONN_MAX_AGE"] = 60
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / os.environ.get("POPPY_SQLITE_NAME", "example.sqlite3")),
            # Writers take the lock up front: no "database is locked" upgrade failures.
            "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 30},
        }
    }

EXECUTOR = "poppy_django.executors.ThreadExecutor"
if REDIS_URL:
    import redis

    EXECUTOR = "poppy_django.executors.CeleryExecutor"
    CELERY_BROKER_URL = REDIS_URL
    CELERY_TASK_ACKS_LATE = True
    CELERY_WORKER_PREFETCH_MULTIPLIER = 1
    # No acknowledgement emulation on Redis (kombu's "unacked" hash): a turn's message is
    # not its only record (the conversation is ``working`` in the database, and the
    # workers' recovery sweep takes up one whose dispatch was lost within LEASE_SECONDS +
    # SWEEP_SECONDS), so the two Redis transactions a task costs to keep it there buy
    # nothing; a warm shutdown still puts back the messages a worker holds.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"ack_emulation": False}
    # The workers log through LOGGING's handler (with the request and trace ids), not the
    # handler Celery would put on the root logger instead.
    CELERY_WORKER_HIJACK_ROOT_LOGGER = False
    # Celery's Django fix-up closes the database connection around every task unless this
    # is set; turns close old connections themselves (CONN_MAX_AGE, CONN_HEALTH_CHECKS), so
    # a worker keeps its connection instead of opening one per turn.
    CELERY_DB_REUSE_MAX = 1000
    # A separate queue per deployment (or test run) sharing one Redis.
    CELERY_TASK_DEFAULT_QUEUE = os.environ.get("POPPY_CELERY_QUEUE", "celery")
    _redis = redis.connection.parse_url(REDIS_URL)
    EVENTSTREAM_REDIS = {
        **{
            key: _redis[key]
            for key in ("host", "port", "db", "password", "username")
            if key in _redis
        },
        # Fail fast while Redis is away: readers fall back to re-reading the database.
        "socket_connect_timeout": 1,
        "socket_timeout": 5,
    }
    # A dispatch that cannot reach the broker fails at once; the reaper dispatches it later.
    CELERY_TASK_PUBLISH_RETRY = False
    CELERY_BROKER_CONNECTION_TIMEOUT = 1
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    }
    # Beat only prunes: workers take up turns whose writer died by themselves.
    CELERY_BEAT_SCHEDULE = {
        "poppy-prune": {"task": "poppy_django.prune", "schedule": 3600.0},
    }

POPPY: dict[str, Any] = {
    "BASE_URL": os.environ.get("POPPY_BASE_URL") or None,
    "PATH": "poppy/conversations",
    "AGENT": "support",
    # The offline scripted model with Acme's rules (example_project/shop/agent.py: SCRIPT).
    "MODEL": os.environ.get("POPPY_MODEL", "scripted:example_project.shop.agent.SCRIPT"),
    # DPoP-bound Session Tokens, minted here by the development authority (poppy_token).
    "AUTHENTICATE": os.environ.get("POPPY_AUTHENTICATE", "poppy_django.verifier.dpop.verify"),
    # The development authority: on by default with DEBUG only. POPPY_DEV_AUTHORITY=1 is the
    # explicit opt-in that runs it with DEBUG off as well (ALLOW_WITHOUT_DEBUG; check W103).
    "DEV_AUTHORITY": (
        {
            "KEY_FILE": str(VAR_DIR / "poppy-dev-signing-key.pem"),
            "ALLOW_WITHOUT_DEBUG": os.environ.get("POPPY_DEV_AUTHORITY") == "1",
        }
        if DEV_AUTHORITY
        else False
    ),
    # Sign-outs and revocations take effect at the next request (once the 5 s status cache
    # expires): the verifier asks the authority whether a token's Session is still on — its
    # own Sessions, and development tokens revoked with poppy_token --revoke.
    "SESSION_STATUS": (
        "poppy_django.authority.status.session_is_active"
        if "poppy_django.authority" in INSTALLED_APPS
        else None
    ),
    "DISCOVERY": {
        # The domain must be the host serving poppy.json (E301): scripts/serve-production.sh
        # with TLS=1 serves it as localhost.
        "ORGANIZATION": {
            "name": "Acme Outfitters",
            "domain": os.environ.get("POPPY_ORGANIZATION_DOMAIN", "acme.example"),
        },
        # Acme's own API for personal agents (example_project/shop/api.py); its orders need
        # the orders:read scope, which the authority offers (POPPY_AUTHORITY below).
        "APIS": [
            {
                "type": "openapi",
                "url": "/api/schema",
                "description": "Your Acme orders: list them and read one (scope orders:read).",
            }
        ],
    },
    "EXECUTOR": EXECUTOR,
    # The Operations extension v1: "cancel <ORDER>" is proposed as an Operation to personal
    # agents that list the extension, and confirmed at /poppy/operations/<id>/confirm;
    # others keep today's approve-delegated action (docs/operations-extension.md). With
    # browser sessions (the authority extra) each operation has a page, /operations/<id>,
    # where the User confirms it in the personal agent's browser.
    "OPERATIONS": {"ENABLED": True, "PAGE_PATH": "operations" if AUTHORITY else None},
    # The Company Agent's tools over MCP at /poppy/mcp, listed in poppy.json's apis.
    "MCP": {"ENABLED": True},
    "HANDOFF_HOOKS": {
        "request": "example_project.shop.desk.request_handoff",
        "message": "example_project.shop.desk.forward_message",
        "cancel": "example_project.shop.desk.cancel_handoff",
    },
    # The desk's office hours, as JSON (docs/settings.md#handoffs-and-the-desks-team), e.g.
    # '{"TIME_ZONE": "Europe/Paris", "HOURS": {"mon-fri": "09:00-18:00"}}'; unset: always open.
    "OFFICE_HOURS": (
        json.loads(os.environ["POPPY_OFFICE_HOURS"])
        if os.environ.get("POPPY_OFFICE_HOURS")
        else None
    ),
    # A handoff no one joins within this many seconds goes back to the Company Agent.
    "HANDOFF_MAX_WAIT_SECONDS": float(os.environ.get("POPPY_HANDOFF_MAX_WAIT_SECONDS", "600")),
    # How many conversations one staff member handles at once (each one's own in the admin's
    # Staff presence overrides it), and the groups that are the desk's teams (comma-separated).
    "DESK_CAPACITY": int(os.environ.get("POPPY_DESK_CAPACITY", "5")),
    "DESK_TEAMS": [name for name in os.environ.get("POPPY_DESK_TEAMS", "").split(",") if name],
    # Events are kept 30 days (the beat task "poppy-prune" deletes older ones hourly).
    "RETENTION_SECONDS": 30 * 86400,
    "LEASE_SECONDS": float(os.environ.get("POPPY_LEASE_SECONDS", "30")),
    "HEARTBEAT_SECONDS": float(os.environ.get("POPPY_HEARTBEAT_SECONDS", "10")),
    "SWEEP_SECONDS": float(os.environ.get("POPPY_SWEEP_SECONDS", "5")),
    "TURN_TIMEOUT_SECONDS": float(os.environ.get("POPPY_TURN_TIMEOUT_SECONDS", "120")),
    # The turn engine's bounds per process (docs/deployment.md): the turns waiting for their
    # model at once, and the threads that run sync tools and the ORM for them.
    "TURNS_IN_FLIGHT": int(os.environ.get("POPPY_TURNS_IN_FLIGHT", "200")),
    "EXECUTOR_THREADS": int(os.environ.get("POPPY_EXECUTOR_THREADS", "8")),
    # Each turn engine's heartbeat file, for `manage.py poppy_worker_probe` on its host.
    "HEARTBEAT_DIR": str(VAR_DIR / "heartbeats"),
    # The OpenTelemetry SDK as the OTEL_* variables say (none set: nothing runs), and this
    # host's metrics at /metrics when the processes write them to PROMETHEUS_MULTIPROC_DIR
    # (OTEL_METRICS_EXPORTER=prometheus_multiprocess): docs/operations.md#monitoring.
    "OPENTELEMETRY": True,
    "METRICS_PATH": "metrics" if os.environ.get("PROMETHEUS_MULTIPROC_DIR") else None,
    # Personal agents report tasks they could not do here (admin: Feedback reports).
    "FEEDBACK": True,
    # The desk's tags for what customers say (docs/desk.md#tags-macros-and-bulk-actions).
    "TAG_RULES": {"refund": ["refund", "money back"], "damaged": ["broken", "snapped", "torn"]},
    # After a person gives a conversation back, the customer is asked to rate the help.
    "CSAT_SURVEY": True,
}
if os.environ.get("POPPY_REQUIRE_NONCE") == "1":
    # DPoP proofs must carry a nonce this server issued (RFC 9449 §8), at the token endpoint
    # and the conversation endpoint: agents retry with the DPoP-Nonce they are sent.
    POPPY["TOKENS"] = {"REQUIRE_NONCE": True}
if os.environ.get("POPPY_ALLOW_FAKE_VERIFIER") == "1":
    # The fake verifier (POPPY_AUTHENTICATE=poppy_django.verifier.fake.verify) with DEBUG
    # off: the multi-process tests' and benchmarks' explicit opt-in (check W104). Without it
    # the fake verifier refuses every request with DEBUG off (and check E108 stops manage.py).
    POPPY["ALLOW_FAKE_VERIFIER_WITHOUT_DEBUG"] = True
if os.environ.get("POPPY_THROTTLE_RATES"):  # e.g. the benchmarks' '{"message": "100000/s"}'
    POPPY["THROTTLE_RATES"] = json.loads(os.environ["POPPY_THROTTLE_RATES"])

# Acme's own DRF APIs are described by drf-spectacular (served at /api/schema).
REST_FRAMEWORK = {"DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema"}

# The authorization server's pages (device sign-in, connected agents) log Users in here.
LOGIN_URL = "poppy_authority:login"
# The scopes Acme's own API needs, offered at sign-in besides poppy:read and poppy:write, and
# the authority's optional channels, all on: the agent's browser joins its Session
# (/poppy/browser-session), and Mediated Sign-In with a username and password checked by
# Django's authenticate() (/poppy/sign-in).
POPPY_AUTHORITY: dict[str, Any] = {"CUSTOM_SCOPES": {"orders:read": "See your Acme orders"}}
if AUTHORITY:  # the channels are the OAuth side's: the authority extra (Authlib, httpx)
    POPPY_AUTHORITY["BROWSER_SESSIONS"] = True
    POPPY_AUTHORITY["MEDIATED_FIELDS"] = [
        {"name": "username", "label": "Username", "secret": False},
        {"name": "password", "label": "Password", "secret": True},
    ]
if os.environ.get("POPPY_OUTBOUND_ROUTES") or os.environ.get("POPPY_OUTBOUND_CA_FILE"):
    # Names the authority reaches through fixed routes (POPPY_OUTBOUND_ROUTES, a private CA
    # in POPPY_OUTBOUND_CA_FILE): example_project/outbound.py. The SSRF rules still apply.
    POPPY_AUTHORITY["RESOLVER"] = "example_project.outbound.resolve"
    POPPY_AUTHORITY["FETCH_TRANSPORT"] = "example_project.outbound.transport"
# Served over https (POPPY_BASE_URL), cookies are Secure: a browser session's cookie too.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = (POPPY["BASE_URL"] or "").startswith("https://")
# A browser session's handoff sets no cookie with a lifetime of its own (Poppy §5): logging
# the account's user in rotates the CSRF token, so its cookie lasts the browser session too.
CSRF_COOKIE_AGE = None
if AUTHORITY and not DEV_AUTHORITY:
    # Production mode: the authority is the issuer, at the public origin (POPPY_ISSUER to
    # name another), signing with a key made once under var/ ($POPPY_AUTHORITY_SIGNING_KEY
    # takes precedence: give every machine the same one). The verifier checks its tokens
    # locally with that key's public half.
    POPPY["ISSUER"] = os.environ.get("POPPY_ISSUER") or (
        POPPY["BASE_URL"] or "http://127.0.0.1:8000"
    ).rstrip("/")
    _made_once("poppy-authority-signing-key.pem", _new_signing_key)
    POPPY_AUTHORITY["SIGNING_KEY_FILE"] = str(VAR_DIR / "poppy-authority-signing-key.pem")

# The support desk: Poppy's live channels (poppy-desk, poppy-<id>) only for desk staff.
EVENTSTREAM_CHANNELMANAGER_CLASS = "poppy_django.desk.channels.DeskChannelManager"

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# The endpoint never redirects: a DPoP proof names one exact URL.
APPEND_SLASH = False

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Each line names its request and trace: a turn's, in a worker, those of the message
    # that started it (docs/logging.md#correlation).
    "filters": {"correlate": {"()": "poppy_django.observe.correlation.Correlate"}},
    "formatters": {
        "plain": {
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s"
            " [request %(request_id)s trace %(trace_id)s]"
        }
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["correlate"],
        }
    },
    # Every logger's lines through the one handler (Celery's, httpx's, the model client's
    # too), so each names its request and trace; the app's at their own level.
    "root": {"handlers": ["console"], "level": os.environ.get("DJANGO_LOG_LEVEL", "INFO")},
    "loggers": {
        "poppy_django": {"level": os.environ.get("POPPY_LOG_LEVEL", "INFO")},
        # The connection pool's warnings only (a database down: once a streak, the app's
        # filter); at INFO it says three lines for every connection lent and given back.
        "psycopg.pool": {"level": "WARNING"},
    },
}
