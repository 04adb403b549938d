#!/usr/bin/env bash
# The example project in production mode on one machine: several ASGI processes, Celery
# workers and beat, on PostgreSQL and Redis. Put a proxy in front (deploy/nginx.conf) with
# buffering off for streams. Scale out by running the same on more machines.
#
#   DATABASE_URL=postgres://... REDIS_URL=redis://... scripts/serve-production.sh
#
# WEB_PROCESSES (2), CELERY_CONCURRENCY (2), PORT (8000); TLS=1 serves https with a
# self-signed certificate under var/tls (for clients that refuse http).
#
# Production mode runs with DEBUG off, where the development authority (the example's only
# token issuer) is refused unless you opt in: POPPY_DEV_AUTHORITY=1 (only where no one else
# can connect). DJANGO_SECRET_KEY: give one (the same on every machine), else a random key
# is made once under var/.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?set DATABASE_URL (PostgreSQL)}"
: "${REDIS_URL:?set REDIS_URL}"
PY=${PY:-.venv/bin/python}
if [ -z "${POPPY_DEV_AUTHORITY:-}" ] && [ -z "${POPPY_AUTHENTICATE:-}" ]; then
  echo "No token issuer: set POPPY_DEV_AUTHORITY=1 (development authority, explicit opt-in)" >&2
  exit 2
fi
PORT=${PORT:-8000}

tls_args=()
if [ "${TLS:-0}" = "1" ]; then
  mkdir -p var/tls
  if [ ! -f var/tls/cert.pem ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
      -subj "/CN=localhost" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
      -keyout var/tls/key.pem -out var/tls/cert.pem 2>/dev/null
  fi
  tls_args=(--ssl-keyfile var/tls/key.pem --ssl-certfile var/tls/cert.pem)
  export POPPY_BASE_URL=${POPPY_BASE_URL:-https://localhost:$PORT}
fi

"$PY" manage.py migrate --no-input
"$PY" -m celery -A example_project worker --concurrency "${CELERY_CONCURRENCY:-2}" --loglevel INFO &
"$PY" -m celery -A example_project beat --schedule var/celerybeat-schedule --loglevel INFO &
trap 'kill $(jobs -p) 2>/dev/null' EXIT
# --proxy-headers: trust X-Forwarded-* from the local proxy only.
exec "$PY" -m uvicorn example_project.asgi:application --host 127.0.0.1 --port "$PORT" \
  --workers "${WEB_PROCESSES:-2}" --proxy-headers --forwarded-allow-ips 127.0.0.1 \
  --timeout-keep-alive 75 "${tls_args[@]}"
