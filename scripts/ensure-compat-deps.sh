#!/usr/bin/env bash
# Installs the unmodified clients of the compatible APIs that
# test/compat_test.go, test/e2b_test.go and test/judging_test.go drive:
# npm's piston-client, and E2B's SDKs e2b and @e2b/code-interpreter,
# pinned by test/compatclients/package-lock.json, from the npm registry
# (once, and again only when the lock file changes); and, for verl's own
# tests of its SandboxFusion client (test/compatclients/verl), Debian's
# python3-pytest and python3-requests when the system's python3 lacks them.
set -euo pipefail
"$(dirname "$0")/ensure-npm-lock.sh" "$(dirname "$0")/../test/compatclients" "the compatible APIs' clients (piston-client, e2b, @e2b/code-interpreter)"
if ! /usr/bin/python3 -c 'import pytest, requests' 2>/dev/null; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing python3-pytest and python3-requests (verl's tests of its SandboxFusion client)"
    apt-get install -y -qq python3-pytest python3-requests >/dev/null ||
      { apt-get update -qq && apt-get install -y -qq python3-pytest python3-requests >/dev/null; }
  else
    echo "verl's tests need python3 with pytest and requests (Debian: python3-pytest python3-requests)" >&2
  fi
fi
