#!/usr/bin/env bash
# Build the gantry image offline: a static binary built here, laid out by
# rootfs.sh, under the Dockerfile's own final stage (FROM scratch: nothing
# to pull). The result is the image the Dockerfile builds where base images
# can be pulled.
# Env: IMAGE (repository, default gantry), VERSION (tag; default git describe).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
IMAGE="${IMAGE:-gantry}"
VERSION="${VERSION:-$(git -C "$ROOT" describe --tags --always --dirty 2>/dev/null || echo dev)}"
CA=/etc/ssl/certs/ca-certificates.crt
die() { echo "deploy/docker/build.sh: $*" >&2; exit 1; }

docker info >/dev/null 2>&1 || die "docker engine not reachable (run scripts/ensure-docker.sh)"
if [ ! -s "$CA" ]; then
  [ "$(id -u)" -eq 0 ] || die "$CA missing; apt-get install -y ca-certificates"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq ca-certificates >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq ca-certificates >/dev/null; } ||
    die "apt-get install ca-certificates failed"
fi

WORK=$(mktemp -d /var/tmp/gantry-image.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$VERSION" -o "$WORK/gantry" ./cmd/gantry) ||
  die "go build failed"
mkdir -p "$WORK/ctx"
sh "$ROOT/deploy/docker/rootfs.sh" "$WORK/ctx/rootfs" "$WORK/gantry" "$CA"

# The Dockerfile's final stage, reading the root filesystem from the
# context instead of the build stage.
DF="$ROOT/deploy/docker/Dockerfile"
grep -q '^COPY --from=build /rootfs/ /$' "$DF" || die "$DF: final stage no longer copies /rootfs/ from the build stage; update build.sh"
sed -n '/^# --- final stage/,$p' "$DF" | sed 's|^COPY --from=build /rootfs/ /$|COPY rootfs/ /|' >"$WORK/ctx/Dockerfile"

docker build -t "$IMAGE:$VERSION" -t "$IMAGE:latest" "$WORK/ctx" >"$WORK/build.log" 2>&1 ||
  die "docker build failed:
$(tail -n 20 "$WORK/build.log")"
out=$(docker run --rm "$IMAGE:$VERSION" version) || die "the image does not run: docker run --rm $IMAGE:$VERSION version"
[ "$out" = "gantry $VERSION" ] || die "docker run $IMAGE:$VERSION version printed '$out', want 'gantry $VERSION'"
size=$(docker image inspect -f '{{.Size}}' "$IMAGE:$VERSION")
echo "deploy/docker/build.sh: built $IMAGE:$VERSION (also :latest), $((size / 1000000)) MB; \`docker run --rm $IMAGE:$VERSION version\` prints '$out'" >&2
echo "$IMAGE:$VERSION"
