#!/usr/bin/env bash
# Run every fuzz target of the module (each `func FuzzXxx` in a _test.go
# file) for FUZZTIME (default 30s), one after another, under the race
# detector like every other test target.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-30s}
GO=${GO:-go}
grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(' . | sort | while read -r file; do
  pkg="./$(dirname "${file#./}")"
  for target in $(grep -oE '^func Fuzz[A-Za-z0-9_]+' "$file" | cut -d' ' -f2); do
    echo "fuzz: $pkg $target ($FUZZTIME)"
    "$GO" test -race "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME"
  done
done
