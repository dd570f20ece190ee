#!/usr/bin/env bash
# Installs the unmodified clients of the compatible APIs that
# test/compat_test.go and test/e2b_test.go drive (npm's piston-client, and
# E2B's SDKs e2b and @e2b/code-interpreter), pinned by
# test/compatclients/package-lock.json, from the npm registry: once, and
# again only when the lock file changes.
set -euo pipefail
exec "$(dirname "$0")/ensure-npm-lock.sh" "$(dirname "$0")/../test/compatclients" "the compatible APIs' clients (piston-client, e2b, @e2b/code-interpreter)"
