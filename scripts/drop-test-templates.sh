#!/usr/bin/env bash
# Drop the template databases the tests cloned (storetest), so that a test
# run leaves no database behind.
set -uo pipefail
URL=${GANTRY_TEST_DATABASE_URL:-postgres://gantry:gantry@127.0.0.1:5432/gantry?sslmode=disable}
for db in $(psql -w "$URL" -XAtqc "SELECT datname FROM pg_database WHERE datname LIKE 'gantry\_tmpl%'" 2>/dev/null); do
  psql -w "$URL" -XAtqc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null || echo "drop-test-templates: could not drop $db" >&2
done
