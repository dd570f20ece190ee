#!/usr/bin/env bash
# Make gVisor's runsc available to dockerd as the runtime "runsc" (Debian's
# runsc package), so that `make test` also runs the runner's sandbox tests
# under gVisor. Idempotent. Never fatal: without it those tests are skipped,
# and this says why.
set -uo pipefail

warn() { echo "ensure-runsc: $* (the gVisor tests will be skipped)" >&2; exit 0; }
has_runtime() { docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; }

has_runtime && exit 0
[ "$(id -u)" -eq 0 ] || warn "not root: cannot install runsc or configure dockerd"
if ! command -v runsc >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq runsc >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq runsc >/dev/null 2>&1; } ||
    warn "apt-get install runsc failed"
fi
RUNSC=$(command -v runsc) || warn "runsc not found after installing it"

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
