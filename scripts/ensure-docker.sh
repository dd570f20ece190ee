#!/usr/bin/env bash
# Ensure a Docker engine is reachable; install docker.io and start dockerd if needed.
set -euo pipefail

LOG=/var/log/gantry-dockerd.log
die() { echo "ensure-docker: $*" >&2; exit 1; }

if docker info >/dev/null 2>&1; then exit 0; fi

if ! command -v dockerd >/dev/null 2>&1; then
  [ "$(id -u)" -eq 0 ] || die "dockerd missing; run as root (or: apt-get install -y docker.io)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq docker.io >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq docker.io >/dev/null; } ||
    die "apt-get install docker.io failed"
fi
command -v docker >/dev/null 2>&1 || die "docker CLI missing after installing docker.io"

if ! pgrep -x dockerd >/dev/null 2>&1; then
  [ "$(id -u)" -eq 0 ] || die "dockerd is not running and starting it needs root"
  # setsid + nohup + no inherited fds: survives the calling make/CI shell.
  setsid nohup dockerd </dev/null >>"$LOG" 2>&1 &
fi

for _ in $(seq 60); do
  if docker info >/dev/null 2>&1; then echo "ensure-docker: dockerd started (log: $LOG)"; exit 0; fi
  sleep 1
done
die "docker info still failing after 60s; see $LOG (last lines below)
$(tail -n 20 "$LOG" 2>/dev/null)"
