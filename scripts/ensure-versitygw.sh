#!/usr/bin/env bash
# Ensure bin/versitygw (the S3 server gantry dev and the tests run) is built.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION=v1.8.0
die() { echo "ensure-versitygw: $*" >&2; exit 1; }

[ -x "$ROOT/bin/versitygw" ] && exit 0
command -v go >/dev/null 2>&1 || die "go not found in PATH; install Go to build versitygw"
mkdir -p "$ROOT/bin"
GOBIN="$ROOT/bin" go install "github.com/versity/versitygw/cmd/versitygw@$VERSION" ||
  die "go install github.com/versity/versitygw/cmd/versitygw@$VERSION failed (needs the Go module proxy)"
echo "ensure-versitygw: built bin/versitygw $VERSION"
