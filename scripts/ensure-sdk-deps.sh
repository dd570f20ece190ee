#!/usr/bin/env bash
# Installs the TypeScript SDK's build tools (typescript, @types/node), pinned
# by sdk/typescript/package-lock.json, from the npm registry: once, and again
# only when the lock file changes. The Python SDK needs nothing.
set -euo pipefail
exec "$(dirname "$0")/ensure-npm-lock.sh" "$(dirname "$0")/../sdk/typescript" "the TypeScript SDK's build tools"
