#!/usr/bin/env bash
# Make gVisor's runsc available: to dockerd as the runtime "runsc" (so that
# `make test` also runs the runner's sandbox tests under gVisor), and to the
# runner itself, which checkpoints and restores stateful sessions with it
# (pause, resume, snapshots, forks: docs/ARCHITECTURE.md, "Live state").
# That needs runsc 2024-07 or later: Debian 12's own (2022-12) panics on
# checkpoint --leave-running and cannot list tmpfs roots after a restore, so
# this installs bookworm-backports' (0.0~20240729). Idempotent. Never fatal:
# without it those tests are skipped, live state is kept in memory only, and
# this says why.
set -uo pipefail

warn() { echo "ensure-runsc: $* (the gVisor tests will be skipped; sessions cannot pause)" >&2; exit 0; }
has_runtime() { docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; }
# new_enough: runsc reports a version of 2024-07-29 or later.
new_enough() {
  local v
  v=$("$1" --version 2>/dev/null | sed -n 's/^runsc version \(0\.0~\)\{0,1\}\([0-9]\{8\}\).*/\2/p' | head -n1)
  [ -n "$v" ] && [ "$v" -ge 20240729 ]
}

[ "$(id -u)" -eq 0 ] || { has_runtime && exit 0; warn "not root: cannot install runsc or configure dockerd"; }
RUNSC=$(command -v runsc || true)
if [ -z "$RUNSC" ] || ! new_enough "$RUNSC"; then
  export DEBIAN_FRONTEND=noninteractive
  . /etc/os-release 2>/dev/null || true
  if [ "${VERSION_CODENAME:-}" = bookworm ]; then
    SRC=/etc/apt/sources.list.d/gantry-bookworm-backports.list
    if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      echo 'deb http://deb.debian.org/debian bookworm-backports main' >"$SRC"
      apt-get update -qq >/dev/null 2>&1 || warn "apt-get update with bookworm-backports failed"
    fi
    apt-get install -y -qq -t bookworm-backports runsc >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq -t bookworm-backports runsc >/dev/null 2>&1; } ||
      warn "apt-get install -t bookworm-backports runsc failed"
  else
    apt-get install -y -qq runsc >/dev/null 2>&1 ||
      { apt-get update -qq && apt-get install -y -qq runsc >/dev/null 2>&1; } ||
      warn "apt-get install runsc failed"
  fi
  RUNSC=$(command -v runsc) || warn "runsc not found after installing it"
  new_enough "$RUNSC" || echo "ensure-runsc: $($RUNSC --version | head -n1) is older than 2024-07: sessions cannot pause with it" >&2
fi
has_runtime && exit 0

# Add the runtime to daemon.json, keeping whatever else it holds.
CONF=/etc/docker/daemon.json
mkdir -p /etc/docker
python3 - "$CONF" "$RUNSC" <<'PY' || warn "could not update $CONF"
import json, os, sys
path, runsc = sys.argv[1], sys.argv[2]
conf = {}
if os.path.exists(path) and os.path.getsize(path) > 0:
    with open(path) as f:
        conf = json.load(f)
conf.setdefault("runtimes", {})["runsc"] = {"path": runsc, "runtimeArgs": ["--network=none"]}
tmp = path + ".gantry-tmp"
with open(tmp, "w") as f:
    json.dump(conf, f, indent=2)
os.replace(tmp, path)
PY
pkill -HUP -x dockerd || warn "no dockerd to reload"
for _ in $(seq 20); do has_runtime && { echo "ensure-runsc: dockerd has the runsc runtime ($RUNSC)"; exit 0; }; sleep 0.5; done
warn "dockerd did not pick up the runsc runtime"
