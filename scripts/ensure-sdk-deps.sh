#!/usr/bin/env bash
# Installs the TypeScript SDK's build tools (typescript, @types/node), pinned
# by sdk/typescript/package-lock.json, from the npm registry: once, and again
# only when the lock file changes. The Python SDK needs nothing.
set -euo pipefail
cd "$(dirname "$0")/../sdk/typescript"
if ! command -v npm >/dev/null; then
	echo "ensure-sdk-deps: npm is not installed (Node.js 18 or later with npm: apt-get install -y nodejs npm)" >&2
	exit 1
fi
want=$(sha256sum package-lock.json | cut -d' ' -f1)
stamp=node_modules/.gantry-lock-sha256
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
npm ci --no-audit --no-fund --loglevel=error >&2
echo "$want" >"$stamp"
echo "ensure-sdk-deps: installed the TypeScript SDK's build tools" >&2
