#!/usr/bin/env bash
# The desk's browser test drives Debian's headless Chromium through Playwright (never a
# browser Playwright downloads). Install it when missing; the test skips, saying why, only if
# it still cannot be found.
set -euo pipefail

if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
  exit 0
fi
if command -v apt-get >/dev/null && [ "$(id -u)" = "0" ]; then
  echo "installing Chromium (Debian package) for the desk's browser test"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
else
  echo "Chromium is missing and cannot be installed here (needs apt-get as root);" \
    "the browser test will be skipped" >&2
fi
