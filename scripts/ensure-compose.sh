#!/usr/bin/env bash
# Ensure docker-compose (Debian's package) is installed: `make deploy-check`
# validates deploy/compose with it.
set -euo pipefail
die() { echo "ensure-compose: $*" >&2; exit 1; }

command -v docker-compose >/dev/null 2>&1 && exit 0
[ "$(id -u)" -eq 0 ] || die "docker-compose missing; run as root or apt-get install -y docker-compose"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq docker-compose >/dev/null 2>&1 ||
  { apt-get update -qq && apt-get install -y -qq docker-compose >/dev/null; } ||
  die "apt-get install docker-compose failed"
echo "ensure-compose: installed $(docker-compose version --short 2>/dev/null || echo docker-compose)"
