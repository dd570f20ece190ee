#!/usr/bin/env bash
# Ensure a local Postgres with role+database "gantry" (password "gantry") is up.
# If GANTRY_DATABASE_URL is set, only check that it is reachable.
set -euo pipefail
export PGCONNECT_TIMEOUT=${PGCONNECT_TIMEOUT:-10}

DEFAULT_URL='postgres://gantry:gantry@127.0.0.1:5432/gantry?sslmode=disable'
die() { echo "ensure-postgres: $*" >&2; exit 1; }
command -v psql >/dev/null 2>&1 || die "psql not found; install postgresql (apt-get install -y postgresql)"

if [ -n "${GANTRY_DATABASE_URL:-}" ]; then
  psql -w "$GANTRY_DATABASE_URL" -XAtqc 'select 1' >/dev/null ||
    die "GANTRY_DATABASE_URL is set but not reachable (psql failed; check the URL/server)"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "must run as root to manage the local cluster (or set GANTRY_DATABASE_URL)"
cd /  # so the postgres user can always access the working directory
did=()

# Newest installed cluster named "main" (fallback 15).
VER=$(pg_lsclusters -h 2>/dev/null | awk '$2=="main"{print $1}' | sort -V | tail -n1)
VER=${VER:-15}
if ! pg_lsclusters -h 2>/dev/null | awk -v v="$VER" '$1==v && $2=="main" && $4 ~ /^online/' | grep -q .; then
  pg_ctlcluster "$VER" main start || die "pg_ctlcluster $VER main start failed; see /var/log/postgresql/postgresql-$VER-main.log"
  did+=("started cluster $VER/main")
fi
for _ in $(seq 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
pg_isready -q -h 127.0.0.1 -p 5432 || die "postgres $VER/main not accepting connections on 127.0.0.1:5432 after 30s"

pgsql() { runuser -u postgres -- psql -XAtq -v ON_ERROR_STOP=1 "$@"; }
if [ -z "$(pgsql -c "select 1 from pg_roles where rolname='gantry'")" ]; then
  pgsql -c "create role gantry login createdb password 'gantry'" || die "creating role gantry failed"
  did+=("created role gantry")
fi
if [ -z "$(pgsql -c "select 1 from pg_database where datname='gantry'")" ]; then
  pgsql -c "create database gantry owner gantry" || die "creating database gantry failed"
  did+=("created database gantry")
fi

psql -w "$DEFAULT_URL" -XAtqc 'select 1' >/dev/null ||
  die "password login failed for $DEFAULT_URL (check pg_hba.conf allows scram-sha-256/md5 for 127.0.0.1 and the gantry role's password)"
if [ ${#did[@]} -gt 0 ]; then
  echo "ensure-postgres: $(printf '%s, ' "${did[@]}")ready at $DEFAULT_URL"
fi
