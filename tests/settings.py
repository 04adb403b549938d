"""The test suite's own settings: the package under test with the example shop as its host
project (its app, URLs and scripted agent), every value fixed here rather than read from the
environment the way the example project's deployment settings are.

The tests about the example project as shipped run ``example_project.settings`` itself, in
subprocesses (tests/multiprocess, tests/authority/shipped.py, tests/tutorial). Only the
database comes from the environment (``DATABASE_URL``, PostgreSQL in ``make test``; SQLite
when unset, as tests/settings_embedded.py runs it).
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path
from typing import Any

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
#: Files the run makes (the development authority's key, SQLite): a directory of its own.
VAR_DIR = Path(os.environ.get("POPPY_VAR_DIR") or tempfile.mkdtemp(prefix="poppy-tests-"))

SECRET_KEY = "poppy-django-tests-not-secret"
#: A fast hasher, as Django's testing docs advise: the default one takes ~0.5 s a password on
#: this machine, paid by every test that makes a customer or logs one in. The shipped
#: project's hasher is the tests' that run it (tests/multiprocess, the conformance suite),
#: but for R4's lockouts, which count attempts (tests/authority/shipped_fast_hashing.py).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEBUG = True  # the development authority mints the tests' tokens (pytest-django runs False)
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]

#: The authority's OAuth side runs where its extra (Authlib, httpx) is installed; without it
#: (tox's noextras run) only its development mode issues tokens.
AUTHORITY = all(importlib.util.find_spec(name) for name in ("authlib", "httpx"))

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_eventstream",
    "poppy_django",
    "poppy_django.authority",
    "example_project.shop",
]

MIDDLEWARE = [
    "poppy_django.api.middleware.PoppyEndpointMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    *(["poppy_django.authority.website.BrowserSessionMiddleware"] if AUTHORITY else []),
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

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

if os.environ.get("DATABASE_URL"):
    DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"])}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / "tests.sqlite3"),
            "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 30},
        }
    }
# Closed after each use: the turn engine's threads must not keep the test database open.
DATABASES["default"]["CONN_MAX_AGE"] = 0

POPPY: dict[str, Any] = {
    "BASE_URL": None,
    "PATH": "poppy/conversations",
    "AGENT": "support",
    "MODEL": "scripted:example_project.shop.agent.SCRIPT",
    # The fake verifier (a header naming the caller): tests that verify real tokens swap it.
    "AUTHENTICATE": "poppy_django.verifier.fake.verify",
    "DEV_AUTHORITY": {"KEY_FILE": str(VAR_DIR / "poppy-dev-signing-key.pem")},
    "SESSION_STATUS": "poppy_django.authority.status.session_is_active",
    "DISCOVERY": {
        "ORGANIZATION": {"name": "Acme Outfitters", "domain": "acme.example"},
        "APIS": [
            {
                "type": "openapi",
                "url": "/api/schema",
                "description": "Your Acme orders: list them and read one (scope orders:read).",
            }
        ],
    },
    "EXECUTOR": "poppy_django.executors.ThreadExecutor",
    # Each operation has a page on the website (with browser sessions: the authority extra).
    "OPERATIONS": {"ENABLED": True, "PAGE_PATH": "operations" if AUTHORITY else None},
    "MCP": {"ENABLED": True},
    "HANDOFF_HOOKS": {
        "request": "example_project.shop.desk.request_handoff",
        "message": "example_project.shop.desk.forward_message",
        "cancel": "example_project.shop.desk.cancel_handoff",
    },
    "RETENTION_SECONDS": 30 * 86400,
    "LEASE_SECONDS": 30.0,
    "HEARTBEAT_SECONDS": 10.0,
    "SWEEP_SECONDS": 5.0,
    "TURN_TIMEOUT_SECONDS": 120.0,
    "FEEDBACK": True,
}

REST_FRAMEWORK = {"DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema"}

LOGIN_URL = "poppy_authority:login"
POPPY_AUTHORITY: dict[str, Any] = {"CUSTOM_SCOPES": {"orders:read": "See your Acme orders"}}
if AUTHORITY:
    POPPY_AUTHORITY["BROWSER_SESSIONS"] = True
    POPPY_AUTHORITY["MEDIATED_FIELDS"] = [
        {"name": "username", "label": "Username", "secret": False},
        {"name": "password", "label": "Password", "secret": True},
    ]

EVENTSTREAM_CHANNELMANAGER_CLASS = "poppy_django.desk.channels.DeskChannelManager"

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
APPEND_SLASH = False

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {"poppy_django": {"handlers": ["console"], "level": "INFO"}},
}

# A browser session's handoff sets no cookie with a lifetime of its own (Poppy §5): logging
# the account's user in rotates the CSRF token, so its cookie lasts the browser session too.
CSRF_COOKIE_AGE = None
