#!/usr/bin/env bash
# The example project in production mode on one machine: several ASGI processes, Celery
# workers and beat, on PostgreSQL and Redis. Put a proxy in front (deploy/nginx.conf) with
# buffering off for streams. Scale out by running the same on more machines.
#
#   DATABASE_URL=postgres://... REDIS_URL=redis://... scripts/serve-production.sh
#
# WEB_PROCESSES (2), CELERY_CONCURRENCY (2), PORT (8000); TLS=1 serves https with a
# self-signed certificate for localhost under $POPPY_VAR_DIR/tls (for clients that refuse
# http): poppy.json then names localhost as the organization's domain. Each process's
# database connections: DATABASE_POOL_MAX_SIZE (10), DATABASE_POOL_TIMEOUT (5 s)
# (docs/deployment.md#sizing-the-pools). A stop (SIGTERM, SIGINT) gives requests in
# flight GRACEFUL_SHUTDOWN_SECONDS (10) before uvicorn closes them, then stops the workers
# and beat: long-polls and streams reconnect elsewhere, nothing acknowledged is lost.
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
VAR=${POPPY_VAR_DIR:-var}
export POPPY_VAR_DIR=$VAR
mkdir -p "$VAR"

tls_args=()
if [ "${TLS:-0}" = "1" ]; then
  mkdir -p "$VAR/tls"
  if [ ! -f "$VAR/tls/cert.pem" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
      -subj "/CN=localhost" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
      -keyout "$VAR/tls/key.pem" -out "$VAR/tls/cert.pem" 2>/dev/null
  fi
  tls_args=(--ssl-keyfile "$VAR/tls/key.pem" --ssl-certfile "$VAR/tls/cert.pem")
  export POPPY_BASE_URL=${POPPY_BASE_URL:-https://localhost:$PORT}
  # poppy.json must name the host that serves it (check E301): here, localhost.
  export POPPY_ORGANIZATION_DOMAIN=${POPPY_ORGANIZATION_DOMAIN:-localhost}
fi

"$PY" manage.py migrate --no-input
pids=()
stop() {
  trap - TERM INT EXIT
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait
}
trap stop TERM INT EXIT
"$PY" -m celery -A example_project worker --concurrency "${CELERY_CONCURRENCY:-2}" --loglevel INFO &
pids+=($!)
"$PY" -m celery -A example_project beat --schedule "$VAR/celerybeat-schedule" --loglevel INFO &
pids+=($!)
# --proxy-headers: trust X-Forwarded-* from the local proxy only. Not exec'd: this shell
# stays to stop the workers and beat when uvicorn stops.
"$PY" -m uvicorn example_project.asgi:application --host 127.0.0.1 --port "$PORT" \
  --workers "${WEB_PROCESSES:-2}" --proxy-headers --forwarded-allow-ips 127.0.0.1 \
  --timeout-keep-alive 75 --timeout-graceful-shutdown "${GRACEFUL_SHUTDOWN_SECONDS:-10}" \
  "${tls_args[@]}" &
pids+=($!)
wait "${pids[-1]}"
