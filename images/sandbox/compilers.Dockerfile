# gantry sandbox image with compilers: the sandbox image plus C and C++ (gcc 12), Go 1.23
# (bookworm-backports), Java 17 (OpenJDK) and Rust 1.96 (rustc-web), all Debian packages.
# It is the operator's choice (GANTRY_IMAGE): about 1 GB larger than the sandbox image
# (docs/PERFORMANCE.md). For hosts that can pull base images, build the sandbox image
# first, then this on top of it, from the repository's root:
#   docker build -t gantry-sandbox -f images/sandbox/Dockerfile .
#   docker build -t gantry-sandbox-compilers --build-arg BASE=gantry-sandbox -f images/sandbox/compilers.Dockerfile .
# build.sh (`make image-compilers`) builds the same layer offline on its base image, with
# the host's network for apt (APT_OPTS adds apt options, e.g. for a snapshot mirror).
# jobs/language.go holds the compile and run commands these tools serve; keep the two in step.
ARG BASE=gantry-sandbox:latest
FROM ${BASE}
ARG APT_OPTS=""
USER 0:0
# - gcc, g++, libc6-dev: C and C++ (the compilers' recommends are left out);
# - golang-1.23-go from bookworm-backports (bookworm's own Go is 1.19: no min, max, slices or
#   range over integers), offline (GOTOOLCHAIN=local, GOPROXY=off in its go.env), its standard
#   library compiled once into a read-only build cache (/usr/lib/gantry/go-build) that each
#   compile starts from, so a job compiles only its own package;
# - openjdk-17-jdk-headless: javac and java;
# - rustc-web: bookworm's current Rust (the rustc package is 1.63); it installs /usr/bin/rustc.
RUN set -eux; \
    echo 'deb http://deb.debian.org/debian bookworm-backports main' >/etc/apt/sources.list.d/gantry-backports.list; \
    apt-get ${APT_OPTS} update; \
    # The JRE's post-install links its man pages, which the image leaves out.
    mkdir -p /usr/share/man/man1; \
    DEBIAN_FRONTEND=noninteractive apt-get ${APT_OPTS} install -y --no-install-recommends \
      gcc g++ libc6-dev golang-1.23-go/bookworm-backports golang-1.23-src/bookworm-backports \
      openjdk-17-jdk-headless rustc-web; \
    rm -rf /etc/apt/sources.list.d/gantry-backports.list /usr/share/man; \
    ln -s /usr/lib/go-1.23/bin/go /usr/lib/go-1.23/bin/gofmt /usr/local/bin/; \
    # The standard library's tests and test data: nothing builds them here.
    find /usr/share/go-1.23/src -name '*_test.go' -delete; \
    find /usr/share/go-1.23/src -type d -name testdata -prune -exec rm -rf {} +; \
    printf '%s\n' 'GOPROXY=off' 'GOSUMDB=off' 'GOTOOLCHAIN=local' 'GOFLAGS=-buildvcs=false' >/usr/lib/go-1.23/go.env; \
    mkdir -p /usr/lib/gantry; \
    HOME=/tmp GOCACHE=/usr/lib/gantry/go-build CGO_ENABLED=0 go build std; \
    HOME=/tmp GOCACHE=/usr/lib/gantry/go-build go clean -fuzzcache; \
    rm -rf /tmp/go /tmp/.cache /tmp/.config; \
    chmod -R a+rX,go-w /usr/lib/gantry; \
    apt-get clean; rm -rf /var/lib/apt/lists/* /var/log/* /tmp/* /tmp/.[!.]*
# Go builds without cgo (static binaries), from the standard library's read-only build cache:
# go build reads it and, unable to write there, compiles the job's own packages every time.
ENV CGO_ENABLED=0 GOCACHE=/usr/lib/gantry/go-build
LABEL org.opencontainers.image.title=gantry-sandbox-compilers
# The languages this image runs (the runner reads it; jobs/language.go names them).
LABEL dev.gantry.languages=python,bash,node,typescript,c,cpp,go,java,rust
USER 1000:1000
