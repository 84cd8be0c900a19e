#!/usr/bin/env bash
# The browser for tests/integration/orchestration/test_ui_browser.py: Debian's chromium, driven by
# Playwright (pinned in requirements.txt; its wheel bundles the driver, so
# `playwright install`, which downloads browser builds, is never needed).
#
# Idempotent: does nothing when the browser is there. Installs it with apt-get
# when we are root on a Debian/Ubuntu machine; otherwise says what to install
# and exits non-zero. EOS_ETL_CHROMIUM names another Chromium binary.
set -euo pipefail

CHROMIUM=${EOS_ETL_CHROMIUM:-/usr/bin/chromium}

fail() { echo "install_browser: $*" >&2; exit 1; }

if [ ! -x "$CHROMIUM" ]; then
  if [ "$CHROMIUM" = /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "install_browser: installing chromium with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium >/dev/null
  else
    fail "Chromium is missing at $CHROMIUM. Install it (Debian/Ubuntu as root: apt-get update && apt-get install -y chromium) or point EOS_ETL_CHROMIUM at a Chromium binary."
  fi
fi

[ -x "$CHROMIUM" ] || fail "apt-get finished but $CHROMIUM is still missing"
# Prove it starts (headless, no display needed); the Debian wrapper prints noise on stderr.
version=$("$CHROMIUM" --headless=new --no-sandbox --disable-gpu --version 2>/dev/null) \
  || fail "$CHROMIUM is installed but does not start; try: $CHROMIUM --headless=new --no-sandbox --version"
echo "install_browser: ${version:-chromium} at $CHROMIUM"
