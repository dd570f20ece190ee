#!/usr/bin/env bash
# Build the gantry sandbox image offline, in two layers (three with VARIANT=compilers):
#   1. the base: mmdebstrap (Debian packages only) + docker import, tagged
#      $IMAGE-base:<first 12 hex of sha256 of its inputs>; about 2 minutes, rebuilt only
#      when those inputs change;
#   (VARIANT=compilers) the base plus compilers.Dockerfile's layer (C, C++, Go, Java and Rust
#      from Debian's packages, apt over the host's network: about 2.5 minutes), tagged
#      $IMAGE-compilers-base:<sha of the base tag and compilers.Dockerfile>;
#   2. the image: that plus the sandbox agent (the static Go binary built from
#      cmd/gantry-agent), tagged $IMAGE:<sha of the layer below and the agent binary> and
#      $IMAGE:latest ($IMAGE-compilers:… for VARIANT=compilers); a few seconds.
# Each step is a no-op when its tag exists. Prints the image's reference on stdout.
# Env: IMAGE (repository, default gantry-sandbox), VARIANT (standard or compilers),
# MIRROR (optional mmdebstrap mirror), APT_OPTS (apt options for the compilers layer),
# GO (the go command).
set -euo pipefail

DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$DIR/../.." && pwd)"
IMAGE="${IMAGE:-gantry-sandbox}"
GO="${GO:-go}"
# Python with the libraries a data agent reaches for first, Node.js with esbuild (TypeScript),
# bubblewrap (each job's sandbox), procps.
PACKAGES=python3,python3-numpy,python3-pandas,python3-scipy,python3-matplotlib,python3-sympy,python3-seaborn,python3-plotly,python3-sklearn,python3-statsmodels,python3-openpyxl,python3-xlrd,python3-networkx,python3-bs4,python3-lxml,python3-tabulate,nodejs,npm,python3-pip,esbuild,procps,bubblewrap
die() { echo "sandbox/build.sh: $*" >&2; exit 1; }

# Code-mode client libraries, relative to $DIR (lib/testdata is for tests, not the image).
PYLIB=(lib/python/gantry/__init__.py)
PYMOD=(lib/python/gantry_figures.py)
NODELIB=(lib/node/gantry/index.js lib/node/gantry/package.json)
# The base's inputs: this script up to the agent layer, and the files it copies in.
BASE_TAG=$(cd "$DIR" && { sed '/^# --- agent layer ---$/,$d' build.sh; cat sitecustomize.py "${PYLIB[@]}" "${PYMOD[@]}" "${NODELIB[@]}"; } | sha256sum | cut -c1-12)
BASE="$IMAGE-base:$BASE_TAG"
# LAYER is what the agent goes on; LANGUAGES label the image (the runner reads them).
case "${VARIANT:=standard}" in
standard)
  LAYER=$BASE OUT=$IMAGE LANGUAGES=python,bash,node,typescript ;;
compilers)
  LAYER="$IMAGE-compilers-base:$( { echo "$BASE_TAG"; cat "$DIR/compilers.Dockerfile"; } | sha256sum | cut -c1-12)"
  OUT=$IMAGE-compilers LANGUAGES="" ;; # compilers.Dockerfile labels its languages
*) echo "sandbox/build.sh: VARIANT=$VARIANT: want standard or compilers" >&2; exit 1 ;;
esac
docker info >/dev/null 2>&1 || die "docker engine not reachable (run scripts/ensure-docker.sh)"
command -v "$GO" >/dev/null 2>&1 || die "go not found (set GO=...); it builds the sandbox agent"

WORK=$(mktemp -d /var/tmp/gantry-sandbox.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/ctx"

# The agent first: the image's tag depends on its bytes (the build is reproducible).
(cd "$ROOT" && CGO_ENABLED=0 "$GO" build -trimpath -buildvcs=false -ldflags='-s -w' \
  -o "$WORK/ctx/gantry-agent" ./cmd/gantry-agent) || die "building the sandbox agent (cmd/gantry-agent) failed"
# The init of every sandbox the warm interpreter makes (cmd/gantry-sandbox-init).
(cd "$ROOT" && CGO_ENABLED=0 "$GO" build -trimpath -buildvcs=false -ldflags='-s -w' \
  -o "$WORK/ctx/sandbox-init" ./cmd/gantry-sandbox-init) || die "building the sandbox init (cmd/gantry-sandbox-init) failed"
NODE_SNAPSHOT_RUN="mkdir -p /usr/lib/gantry && echo 0 >/tmp/snapshot.js && node --snapshot-blob /usr/lib/gantry/node-snapshot.blob --build-snapshot /tmp/snapshot.js && rm -f /tmp/snapshot.js && chmod 644 /usr/lib/gantry/node-snapshot.blob"
TAG=$( { echo "$LAYER"; echo "$NODE_SNAPSHOT_RUN"; sha256sum <"$WORK/ctx/gantry-agent"; sha256sum <"$WORK/ctx/sandbox-init"; } | sha256sum | cut -c1-12)
REF="$OUT:$TAG"
if docker image inspect "$REF" >/dev/null 2>&1; then
  docker tag "$REF" "$OUT:latest"
  echo "$REF"
  exit 0
fi

if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  if ! command -v mmdebstrap >/dev/null 2>&1; then
    [ "$(id -u)" -eq 0 ] || die "mmdebstrap missing; run as root or apt-get install -y mmdebstrap"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq mmdebstrap >/dev/null 2>&1 ||
      { apt-get update -qq && apt-get install -y -qq mmdebstrap >/dev/null; } ||
      die "apt-get install mmdebstrap failed"
  fi

  # Empty placeholder packages for hard dependencies that are useless at runtime:
  # scipy -> pythran (a compiler: pulls gcc, g++, boost, python3-dev; ~600 MB),
  # matplotlib -> pil.imagetk (pulls tk and X11), fonttools -> unicode-data (37 MB of
  # text files nothing reads). Placeholders keep dpkg's database consistent.
  placeholder() {
    mkdir -p "$WORK/$1/DEBIAN"
    printf 'Package: %s\nVersion: 99:0\nArchitecture: all\nMaintainer: gantry\nDescription: gantry sandbox placeholder (not needed at runtime)\n' \
      "$1" >"$WORK/$1/DEBIAN/control"
    dpkg-deb --root-owner-group -b "$WORK/$1" "$WORK/$1.deb" >/dev/null
    INCLUDES+=(--include="$WORK/$1.deb")
  }
  INCLUDES=()
  for p in python3-pythran python3-pil.imagetk unicode-data; do placeholder "$p"; done
  start=$SECONDS
  echo "sandbox/build.sh: building the base $BASE (mmdebstrap, ~2 min)" >&2

  # Hooks run on the host with "$1" = the new root filesystem. mmdebstrap clamps mtimes,
  # so sitecustomize's and gantry's .pyc are hash-based (else stale, recompiled every start).
  # gantry: `import gantry` (dist-packages) and `require('gantry')` (a node global path).
  mmdebstrap --variant=minbase --include="$PACKAGES" \
    "${INCLUDES[@]}" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --setup-hook="mkdir -p \"\$1$WORK\" && cp $WORK/*.deb \"\$1$WORK/\"" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --customize-hook='chroot "$1" groupadd -g 1000 sandbox' \
    --customize-hook='chroot "$1" useradd -u 1000 -g 1000 -d /tmp -M -s /bin/bash sandbox' \
    --customize-hook='mkdir -p "$1/workspace" "$1/skills" && chown 1000:1000 "$1/workspace"' \
    --customize-hook='mkdir -p "$1/home" && ln -s /workspace "$1/home/user"' \
    --customize-hook='ln -s /skills "$1/usr/lib/python3/dist-packages/skills"' \
    --customize-hook="cp '$DIR/sitecustomize.py' \"\$1/etc/python3.11/sitecustomize.py\"" \
    --customize-hook='chroot "$1" python3 -m compileall -q --invalidation-mode unchecked-hash /usr/lib/python3.11/sitecustomize.py' \
    --customize-hook="install -d -m 755 \"\$1/usr/lib/python3/dist-packages/gantry\" \"\$1/usr/share/nodejs/gantry\"" \
    --customize-hook="cd '$DIR' && install -m 644 ${PYLIB[*]} \"\$1/usr/lib/python3/dist-packages/gantry/\"" \
    --customize-hook="cd '$DIR' && install -m 644 ${PYMOD[*]} \"\$1/usr/lib/python3/dist-packages/\"" \
    --customize-hook="cd '$DIR' && install -m 644 ${NODELIB[*]} \"\$1/usr/share/nodejs/gantry/\"" \
    --customize-hook='chroot "$1" python3 -m compileall -q --invalidation-mode unchecked-hash /usr/lib/python3/dist-packages/gantry /usr/lib/python3/dist-packages/gantry_figures.py' \
    --customize-hook='chown -R 0:0 "$1/usr/lib/python3/dist-packages/gantry" "$1/usr/share/nodejs/gantry" && chmod -R a+rX,go-w "$1/usr/lib/python3/dist-packages/gantry" "$1/usr/share/nodejs/gantry"' \
    --customize-hook='chroot "$1" env MPLCONFIGDIR=/usr/share/gantry/matplotlib python3 -c "import matplotlib.font_manager"' \
    --customize-hook='chmod -R a+rX "$1/usr/share/gantry"' \
    --customize-hook='find "$1/usr/lib/python3/dist-packages" -type d -name tests -prune -exec rm -rf {} +' \
    --customize-hook='rm -f "$1"/usr/lib/python3/dist-packages/matplotlib-*-nspkg.pth && chroot "$1" python3 -c "import mpl_toolkits.mplot3d"' \
    --customize-hook="rm -rf \"\$1$WORK\" \"\$1\"/var/cache/apt/* \"\$1\"/var/lib/apt/lists/* \"\$1\"/var/log/* \"\$1\"/tmp/*" \
    bookworm "$WORK/rootfs.tar" ${MIRROR:+"$MIRROR"} >"$WORK/mmdebstrap.log" 2>&1 ||
    die "mmdebstrap failed (needs a reachable Debian bookworm apt mirror; set MIRROR=... to override); log tail:
$(tail -n 40 "$WORK/mmdebstrap.log")"

  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' --change 'ENV PYTHONUNBUFFERED=1' --change 'ENV MPLBACKEND=module://gantry_figures' \
    --change 'ENV HOME=/tmp' --change 'ENV MPLCONFIGDIR=/tmp/matplotlib' \
    --change 'LABEL org.opencontainers.image.title=gantry-sandbox' \
    --change 'USER 1000:1000' --change 'WORKDIR /workspace' --change 'CMD ["bash"]' \
    "$WORK/rootfs.tar" "$BASE" >/dev/null || die "docker import failed"
  rm -f "$WORK/rootfs.tar"
  echo "sandbox/build.sh: built the base $BASE in $((SECONDS - start))s" >&2
fi

# --- agent layer ---
# The compilers' layer: apt in a build container on the host's network (the Debian mirror
# mmdebstrap used), so it needs no registry either.
if [ "$LAYER" != "$BASE" ] && ! docker image inspect "$LAYER" >/dev/null 2>&1; then
  start=$SECONDS
  echo "sandbox/build.sh: building $LAYER (compilers.Dockerfile, ~2.5 min)" >&2
  mkdir -p "$WORK/compilers"
  DOCKER_BUILDKIT=0 docker build --network host --build-arg BASE="$BASE" --build-arg APT_OPTS="${APT_OPTS:-}" \
    -t "$LAYER" -f "$DIR/compilers.Dockerfile" "$WORK/compilers" >"$WORK/compilers.log" 2>&1 ||
    die "docker build of the compilers layer failed (it needs the Debian mirror the host's apt uses); log tail:
$(tail -n 30 "$WORK/compilers.log")"
  echo "sandbox/build.sh: built $LAYER in $((SECONDS - start))s" >&2
fi

# The agent is every sandbox container's main process (see package agent). The legacy
# builder needs nothing but the local base image.
PROTOCOL=$(sed -n 's/^const Protocol = \([0-9]*\)$/\1/p' "$ROOT/agent/wire/proto.go")
{
  printf 'FROM %s\nCOPY gantry-agent /usr/local/bin/gantry-agent\nLABEL dev.gantry.agent-protocol=%s\n' "$LAYER" "$PROTOCOL"
  # Execute-only: the kernel makes the sandboxes' init not dumpable from its start.
  printf 'COPY sandbox-init /usr/local/lib/gantry/sandbox-init\n'
  # A startup snapshot of Node for the spares' Nodes (agent/nodespare.go), made by the
  # image's own Node: it starts in half the CPU.
  printf 'USER 0\nRUN %s\nUSER 1000:1000\n' "$NODE_SNAPSHOT_RUN"
  [ -z "$LANGUAGES" ] || printf 'LABEL dev.gantry.languages=%s\n' "$LANGUAGES"
  printf 'CMD ["/usr/local/bin/gantry-agent"]\n'
} >"$WORK/ctx/Dockerfile"
chmod 755 "$WORK/ctx/gantry-agent"
chmod 111 "$WORK/ctx/sandbox-init"
DOCKER_BUILDKIT=0 docker build -q -t "$REF" "$WORK/ctx" >"$WORK/build.log" 2>&1 ||
  die "docker build of the agent layer failed:
$(tail -n 20 "$WORK/build.log")"
docker tag "$REF" "$OUT:latest"
size=$(docker image inspect -f '{{.Size}}' "$REF")
echo "sandbox/build.sh: built $REF ($((size / 1000000)) MB)" >&2
echo "$REF"
