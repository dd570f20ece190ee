#!/usr/bin/env bash
# Ensure bin/golangci-lint (the pinned version .golangci.yml is written for) is built.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION=v2.15.0
die() { echo "ensure-golangci-lint: $*" >&2; exit 1; }
if [ -x "$ROOT/bin/golangci-lint" ] && "$ROOT/bin/golangci-lint" version 2>/dev/null | grep -q "version ${VERSION#v} "; then
  exit 0
fi
command -v go >/dev/null 2>&1 || die "go not found in PATH"
mkdir -p "$ROOT/bin"
echo "ensure-golangci-lint: building golangci-lint $VERSION (a few minutes, once)" >&2
GOBIN="$ROOT/bin" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$VERSION" ||
  die "go install golangci-lint@$VERSION failed (needs the Go module proxy)"
