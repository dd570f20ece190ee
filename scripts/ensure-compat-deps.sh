#!/usr/bin/env bash
# Installs the unmodified clients of the compatible APIs that
# test/compat_test.go drives (npm's piston-client), pinned by
# test/compatclients/package-lock.json, from the npm registry: once, and
# again only when the lock file changes.
set -euo pipefail
cd "$(dirname "$0")/../test/compatclients"
if ! command -v npm >/dev/null; then
	echo "ensure-compat-deps: npm is not installed (Node.js 18 or later with npm: apt-get install -y nodejs npm)" >&2
	exit 1
fi
want=$(sha256sum package-lock.json | cut -d' ' -f1)
stamp=node_modules/.gantry-lock-sha256
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
npm ci --no-audit --no-fund --loglevel=error >&2
echo "$want" >"$stamp"
echo "ensure-compat-deps: installed the compatible APIs' clients (piston-client)" >&2
