#!/usr/bin/env bash
# Start PostgreSQL and Redis when they are installed but down (CI machines start them before
# the session; a developer's machine may have stopped them); install PgBouncer when missing.
set -euo pipefail

if command -v pg_isready >/dev/null && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  echo "starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start
  for _ in $(seq 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
if command -v redis-cli >/dev/null && ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 1; done
fi
# PgBouncer: the tests start private ones (tests/pgbouncer.py), so only the binary is needed.
if ! command -v pgbouncer >/dev/null && ! test -x /usr/sbin/pgbouncer; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing PgBouncer"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null
  else
    echo "PgBouncer is missing (sudo apt-get install pgbouncer): its tests will fail" >&2
  fi
fi
# promtool (Debian's prometheus package) validates deploy/prometheus/ in the tests.
if ! command -v promtool >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing promtool"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  else
    echo "promtool is missing (sudo apt-get install prometheus): its tests will fail" >&2
  fi
fi
pg_isready -h 127.0.0.1 -p 5432
redis-cli -h 127.0.0.1 -p 6379 ping
