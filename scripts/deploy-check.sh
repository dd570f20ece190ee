#!/usr/bin/env bash
# Validate deploy/ as CI does: the compose file with `docker-compose config`,
# the Helm chart with `helm lint` and `helm template` (each values file in
# deploy/helm/gantry/ci/) checked by `kubeconform -strict` against the JSON
# schemas of Kubernetes' own OpenAPI documents; and that bad input is
# refused. helm and kubeconform run from their Go modules, pinned in
# deploy/tools/go.mod; the OpenAPI documents come from the k8s.io/kubernetes
# module (K8S_VERSION) and are converted once into bin/k8s-schemas.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S_VERSION=1.37.2
TOOLS="$ROOT/deploy/tools"
CHART="$ROOT/deploy/helm/gantry"
COMPOSE="$ROOT/deploy/compose/compose.yaml"
SCHEMAS="$ROOT/bin/k8s-schemas"
die() { echo "deploy-check: $*" >&2; exit 1; }
say() { echo "deploy-check: $*"; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# --- compose ---
"$ROOT/scripts/ensure-compose.sh"
docker-compose -f "$COMPOSE" --env-file "$ROOT/deploy/compose/.env.example" config -q ||
  die "docker-compose config rejects $COMPOSE"
: >"$WORK/empty.env"
if docker-compose -f "$COMPOSE" --env-file "$WORK/empty.env" config -q >"$WORK/compose.out" 2>&1 ||
  ! grep -Eq 'POSTGRES_PASSWORD|NATS_PASSWORD' "$WORK/compose.out"; then
  die "compose file accepted without its secrets (want an error naming POSTGRES_PASSWORD or NATS_PASSWORD): $(cat "$WORK/compose.out")"
fi
say "compose: $(docker-compose -f "$COMPOSE" --env-file "$ROOT/deploy/compose/.env.example" config --services | wc -l) services valid"

# --- Kubernetes schemas, made once per K8S_VERSION and converter ---
stamp="$K8S_VERSION $(sha256sum "$TOOLS/k8sschema/main.go" | cut -c1-16)"
if [ "$(cat "$SCHEMAS/.stamp" 2>/dev/null)" != "$stamp" ]; then
  spec=$(cd / && go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$spec/api/openapi-spec/v3" ] || die "go mod download k8s.io/kubernetes@v$K8S_VERSION gave no api/openapi-spec/v3 (needs the Go module proxy)"
  rm -rf "$SCHEMAS"
  (cd "$TOOLS" && go run ./k8sschema -spec "$spec/api/openapi-spec/v3" -out "$SCHEMAS" -version "$K8S_VERSION")
  echo "$stamp" >"$SCHEMAS/.stamp"
fi

# --- Helm chart ---
# The pinned tools, built once (go build's cache makes this a check).
BIN="$ROOT/bin/tools"
mkdir -p "$BIN"
(cd "$TOOLS" && go build -o "$BIN/" helm.sh/helm/v3/cmd/helm github.com/yannh/kubeconform/cmd/kubeconform github.com/prometheus/prometheus/cmd/promtool) ||
  die "building helm, kubeconform and promtool from deploy/tools/go.mod failed (needs the Go module proxy once)"
helm() { "$BIN/helm" "$@"; }
for values in "$CHART"/ci/*.yaml; do
  name=$(basename "$values" .yaml)
  helm lint --strict --quiet "$CHART" --kube-version "$K8S_VERSION" -f "$values" >"$WORK/lint.out" 2>&1 ||
    die "helm lint with $name: $(cat "$WORK/lint.out")"
  helm template gantry "$CHART" --kube-version "$K8S_VERSION" -f "$values" >"$WORK/$name.yaml" ||
    die "helm template with $name failed"
done
"$BIN/kubeconform" -strict -summary -kubernetes-version "$K8S_VERSION" -schema-location "$SCHEMAS" "$WORK"/*.yaml ||
  die "kubeconform -strict rejects the rendered chart"
# The schemas are strict: a misspelt field or a wrong type fails.
cat >"$WORK/bad-manifest.yml" <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: bad}
spec:
  replicas: "2"
  selector: {matchLabels: {app: bad}}
  template:
    metadata: {labels: {app: bad}}
    spec:
      containers: [{name: bad, image: bad, imagePullPolicyy: Always}]
YAML
if "$BIN/kubeconform" -strict -kubernetes-version "$K8S_VERSION" -schema-location "$SCHEMAS" "$WORK/bad-manifest.yml" >"$WORK/bad.out" 2>&1 ||
  ! grep -q "imagePullPolicyy" "$WORK/bad.out" || ! grep -q "/spec/replicas" "$WORK/bad.out"; then
  die "kubeconform accepted a Deployment with a misspelt field and a string for replicas: $(cat "$WORK/bad.out")"
fi
for kind in Deployment Service PodDisruptionBudget HorizontalPodAutoscaler DaemonSet Secret; do
  grep -q "^kind: $kind$" "$WORK"/*.yaml || die "the rendered chart has no $kind"
done

# Bad values are refused with a message naming them.
refused() { # want-in-message, helm args...
  local want=$1; shift
  if helm template gantry "$CHART" --kube-version "$K8S_VERSION" "$@" >"$WORK/bad.out" 2>&1 || ! grep -q -- "$want" "$WORK/bad.out"; then
    die "helm template $* was not refused with '$want': $(tail -n 5 "$WORK/bad.out")"
  fi
}
refused "postgres.url is required"
refused "additional properties 'slot' not allowed" -f "$CHART/ci/cluster-values.yaml" --set runner.slot=3
refused "/nats/url" -f "$CHART/ci/cluster-values.yaml" --set nats.url=localhost:4222
say "helm chart: $(ls "$CHART"/ci/*.yaml | wc -l) values files render, lint and validate against Kubernetes $K8S_VERSION; bad values refused"

# --- monitoring: the alert rules parse, their unit tests pass; a broken
# rule is refused ---
MON="$ROOT/deploy/monitoring"
"$BIN/promtool" check rules "$MON/alerts.yaml" >"$WORK/rules.out" 2>&1 || die "promtool check rules: $(cat "$WORK/rules.out")"
(cd "$MON" && "$BIN/promtool" test rules alerts_test.yaml) >"$WORK/rules.out" 2>&1 || die "promtool test rules: $(cat "$WORK/rules.out")"
printf 'groups:\n  - name: x\n    rules:\n      - alert: Broken\n        expr: sum(rate(gantry_jobs_finished_total[5m]) > \n' >"$WORK/bad-rules.yaml"
if "$BIN/promtool" check rules "$WORK/bad-rules.yaml" >/dev/null 2>&1; then
  die "promtool accepted a rule that does not parse"
fi
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$MON/gantry-dashboard.json" 2>/dev/null ||
  die "deploy/monitoring/gantry-dashboard.json is not JSON"
say "monitoring: $(grep -c -- '- alert:' "$MON/alerts.yaml") alert rules valid and their tests pass; the dashboard is JSON (test/TestMonitoringNamesRealMetrics checks its metrics)"
