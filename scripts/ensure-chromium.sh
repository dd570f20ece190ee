#!/usr/bin/env bash
# Ensure a headless-capable Chromium is installed, for the console's browser
# tests (test/console_test.go drives it with chromedp). Installs Debian's
# chromium package if no browser is found; idempotent.
set -euo pipefail

die() { echo "ensure-chromium: $*" >&2; exit 1; }

for b in "${GANTRY_CHROMIUM:-}" chromium chromium-browser google-chrome; do
  if [ -n "$b" ] && command -v "$b" >/dev/null 2>&1; then exit 0; fi
done

[ "$(id -u)" -eq 0 ] || die "chromium is missing; run as root (or: apt-get install -y chromium)"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null 2>&1 ||
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null; } ||
  die "apt-get install chromium failed"
command -v chromium >/dev/null 2>&1 || die "no chromium on PATH after installing it"
echo "ensure-chromium: installed $(chromium --version 2>/dev/null || echo chromium)"
