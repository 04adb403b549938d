"""Settings of the example project, from the environment.

- ``DATABASE_URL``: unset → SQLite under ``var/`` (the embedded default).
- ``REDIS_URL``: unset → embedded mode (turns in in-process threads, in-process wake-ups);
  set → production mode (Celery workers, Redis fan-out and cache).
- ``POPPY_BASE_URL``: the public origin DPoP proofs name.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("POPPY_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-project-not-secret")
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
if DATABASE_URL:
    DATABASES = {
        "default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / os.environ.get("POPPY_SQLITE_NAME", "example.sqlite3")),
            # Writers take the lock up front: no "database is locked" upgrade failures.
            "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 30},
        }
    }

REDIS_URL = os.environ.get("REDIS_URL")
EXECUTOR = "poppy_django.executors.ThreadExecutor"
if REDIS_URL:
    import redis

    EXECUTOR = "poppy_django.executors.CeleryExecutor"
    CELERY_BROKER_URL = REDIS_URL
    CELERY_TASK_ACKS_LATE = True
    CELERY_WORKER_PREFETCH_MULTIPLIER = 1
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
    "MODEL": os.environ.get("POPPY_MODEL", "scripted"),
    # DPoP-bound Session Tokens, minted here by the development authority (poppy_token).
    "AUTHENTICATE": os.environ.get("POPPY_AUTHENTICATE", "poppy_django.auth.dpop.verify"),
    # POPPY_DEV_AUTHORITY=0 turns it off (it is refused with DEBUG=False: check E101).
    "DEV_AUTHORITY": (
        {"KEY_FILE": str(VAR_DIR / "poppy-dev-signing-key.pem")}
        if os.environ.get("POPPY_DEV_AUTHORITY", "1") == "1"
        else False
    ),
    "DISCOVERY": {"ORGANIZATION": {"name": "Acme Outfitters", "domain": "acme.example"}},
    "EXECUTOR": EXECUTOR,
    "HANDOFF_HOOKS": {
        "request": "example_project.shop.desk.request_handoff",
        "message": "example_project.shop.desk.forward_message",
        "cancel": "example_project.shop.desk.cancel_handoff",
    },
    # Events are kept 30 days (the beat task "poppy-prune" deletes older ones hourly).
    "RETENTION_SECONDS": 30 * 86400,
    "LEASE_SECONDS": float(os.environ.get("POPPY_LEASE_SECONDS", "30")),
    "HEARTBEAT_SECONDS": float(os.environ.get("POPPY_HEARTBEAT_SECONDS", "10")),
    "SWEEP_SECONDS": float(os.environ.get("POPPY_SWEEP_SECONDS", "5")),
    "TURN_TIMEOUT_SECONDS": float(os.environ.get("POPPY_TURN_TIMEOUT_SECONDS", "120")),
}

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
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "poppy_django": {
            "handlers": ["console"],
            "level": os.environ.get("POPPY_LOG_LEVEL", "INFO"),
        }
    },
}
