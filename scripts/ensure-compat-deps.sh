#!/usr/bin/env bash
# Installs the unmodified clients of the compatible APIs that
# test/compat_test.go drives (npm's piston-client), pinned by
# test/compatclients/package-lock.json, from the npm registry: once, and
# again only when the lock file changes.
set -euo pipefail
exec "$(dirname "$0")/ensure-npm-lock.sh" "$(dirname "$0")/../test/compatclients" "the compatible APIs' clients (piston-client)"
