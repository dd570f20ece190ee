#!/usr/bin/env bash
# ensure-npm-lock.sh DIR WHAT: installs the npm packages DIR's
# package-lock.json pins (npm ci), once, and again only when the lock file
# changes. WHAT says what they are, for the messages.
set -euo pipefail
dir=$1 what=$2
cd "$dir"
if ! command -v npm >/dev/null; then
	echo "$(basename "$0"): npm is not installed (Node.js 18 or later with npm: apt-get install -y nodejs npm)" >&2
	exit 1
fi
want=$(sha256sum package-lock.json | cut -d' ' -f1)
stamp=node_modules/.gantry-lock-sha256
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
npm ci --no-audit --no-fund --loglevel=error >&2
echo "$want" >"$stamp"
echo "installed $what" >&2
