# gantry — `make run` starts a single-machine gantry, `make test` proves it.
# Both install or start what is missing (Docker engine, Postgres, the sandbox
# image, the S3 server) and are safe to run again.

SHELL   := /bin/bash
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
ROOT    := $(CURDIR)

export GANTRY_VERSITYGW_BIN ?= $(ROOT)/bin/versitygw

# The sandbox image `make image` built last (its exact tag, not :latest, so
# that another checkout's build cannot swap it), and the compilers image
# `make image-compilers` built last. SANDBOX=compilers has run and bench use
# the compilers image; GANTRY_IMAGE overrides either. make test uses the
# compilers image (the standard one plus C, C++, Go, Java and Rust).
IMAGE_FILE           := bin/sandbox-image
COMPILERS_IMAGE_FILE := bin/sandbox-image-compilers
SANDBOX              ?= standard
ifeq ($(SANDBOX),compilers)
SANDBOX_IMAGE = $${GANTRY_IMAGE:-$$(cat $(COMPILERS_IMAGE_FILE))}
SANDBOX_DEPS  = image-compilers
else
SANDBOX_IMAGE = $${GANTRY_IMAGE:-$$(cat $(IMAGE_FILE))}
endif
TEST_IMAGE = $${GANTRY_IMAGE:-$$(cat $(COMPILERS_IMAGE_FILE))}

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[1m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/gantry
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/gantry ./cmd/gantry

.PHONY: docker
docker: ## make sure a Docker engine runs (installs docker.io if needed)
	@scripts/ensure-docker.sh

.PHONY: postgres
postgres: ## make sure the local Postgres runs with the gantry role and database
	@scripts/ensure-postgres.sh

.PHONY: versitygw
versitygw: ## build bin/versitygw, the S3 server for dev and tests
	@scripts/ensure-versitygw.sh

.PHONY: runsc
runsc: docker ## make gVisor (runsc) available to dockerd, for the gVisor tests (never fatal)
	@scripts/ensure-runsc.sh

.PHONY: image
image: docker ## build the sandbox image offline from Debian packages and the agent (if missing)
	@mkdir -p bin && GO=$(GO) images/sandbox/build.sh >$(IMAGE_FILE).tmp && mv $(IMAGE_FILE).tmp $(IMAGE_FILE) && \
		echo "sandbox image: $$(cat $(IMAGE_FILE))"

.PHONY: image-compilers
image-compilers: docker ## build the compilers image offline: the sandbox image plus C, C++, Go, Java and Rust (if missing)
	@mkdir -p bin && GO=$(GO) VARIANT=compilers images/sandbox/build.sh >$(COMPILERS_IMAGE_FILE).tmp && \
		mv $(COMPILERS_IMAGE_FILE).tmp $(COMPILERS_IMAGE_FILE) && echo "compilers image: $$(cat $(COMPILERS_IMAGE_FILE))"

.PHONY: gantry-image
gantry-image: docker ## build the gantry image offline from a static binary (gantry:<version> and :latest)
	@deploy/docker/build.sh

.PHONY: deploy-check
deploy-check: ## validate deploy/: compose file (docker-compose config), Helm chart (helm template + kubeconform -strict)
	@scripts/deploy-check.sh

.PHONY: chromium
chromium: ## install Chromium for the console's browser tests (Debian's chromium, if missing)
	@scripts/ensure-chromium.sh

.PHONY: sdk-deps
sdk-deps: ## install the TypeScript SDK's pinned build tools (npm ci, once)
	@scripts/ensure-sdk-deps.sh

.PHONY: compat-deps
compat-deps: ## install the compatible APIs' unmodified clients the tests drive (npm's piston-client, e2b, @e2b/code-interpreter, @computesdk/e2b; pinned; once)
	@scripts/ensure-compat-deps.sh

.PHONY: openapi
openapi: ## write ingress/openapi.json from the route table, the Go types and ingress/httpapi/openapi.yaml (a test fails when it is stale)
	$(GO) generate ./ingress

.PHONY: sdk
sdk: ## generate the SDKs' types from ingress/openapi.json (a test fails when they are stale)
	$(GO) run ./sdk/gen

.PHONY: deps
deps: docker postgres versitygw image $(SANDBOX_DEPS) sdk-deps compat-deps ## everything run and test need (SANDBOX=compilers: the compilers image too)

.PHONY: run
run: deps build ## start gantry in dev mode on 127.0.0.1:8080
	GANTRY_IMAGE=$(SANDBOX_IMAGE) exec bin/gantry dev

# The runner tests that also run under gVisor: the launchers' conformance
# suite, hardening, program faults, sessions, usage, stateful sessions (their
# interpreter runs in the container there).
RUNSC_TESTS := ^(TestRunner|TestLaunchers|TestKillAllHurtsOnlyTheJob|TestProgramFaultsRunOnce|TestSessions|TestUsage|TestStatefulSessions|TestEgress|TestEgressInStatefulSession)$$

# Every test target runs its tests under the race detector. The end-to-end
# tests (test/...) run apart, after the others, and drive the gantry binary,
# which is built without it: the race detector watches their own goroutines.
RACE_PKGS = $$($(GO) list ./... | grep -v '/gantry/test')

.PHONY: test
test: deps image-compilers chromium runsc build deploy-check ## run every test against the real engines (on the compilers image, with the race detector; the sandbox tests under gVisor too), and validate deploy/
	@status=0; \
	GANTRY_IMAGE=$(TEST_IMAGE) GANTRY_TEST_REQUIRE=1 GANTRY_BIN=$(ROOT)/bin/gantry \
		$(GO) test -race -count=1 -timeout 20m $(RACE_PKGS) || status=$$?; \
	GANTRY_IMAGE=$(TEST_IMAGE) GANTRY_TEST_REQUIRE=1 GANTRY_BIN=$(ROOT)/bin/gantry \
		$(GO) test -race -count=1 -timeout 20m ./test/... || status=$$?; \
	if [ $$status -eq 0 ]; then \
		if docker info --format '{{json .Runtimes}}' | grep -q '"runsc"'; then \
			echo "the runner's sandbox tests under gVisor (GANTRY_TEST_RUNTIME=runsc):"; \
			GANTRY_IMAGE=$(TEST_IMAGE) GANTRY_TEST_REQUIRE=1 GANTRY_TEST_RUNTIME=runsc \
				$(GO) test -race -count=1 -timeout 10m -run '$(RUNSC_TESTS)' ./runner || status=$$?; \
		else echo "dockerd has no runsc runtime: the gVisor tests were skipped (make runsc)"; fi; \
	fi; \
	scripts/drop-test-templates.sh; exit $$status

.PHONY: chaos
chaos: deps build ## fault injection: 3 NATS nodes, Postgres, S3, 2 ingresses and 2 runners under load, faults one after another (about 7 minutes)
	$(GO) build -o bin/nats-server github.com/nats-io/nats-server/v2
	GANTRY_CHAOS=1 GANTRY_IMAGE=$(SANDBOX_IMAGE) GANTRY_BIN=$(ROOT)/bin/gantry GANTRY_CHAOS_NATS_BIN=$(ROOT)/bin/nats-server \
		$(GO) test -race -count=1 -timeout 20m -v -run '^TestChaos$$' ./test/chaos

.PHONY: bench
bench: deps build ## measure gantry against plain docker run; prints a table, writes bench-results.json
	GANTRY_IMAGE=$(SANDBOX_IMAGE) $(GO) run ./bench -gantry bin/gantry -image $(SANDBOX_IMAGE)

.PHONY: screenshots
screenshots: deps chromium build ## the console's pages in headless Chromium, as PNGs in docs/console/
	GANTRY_IMAGE=$(SANDBOX_IMAGE) GANTRY_TEST_REQUIRE=1 GANTRY_BIN=$(ROOT)/bin/gantry GANTRY_CONSOLE_SCREENSHOTS=$(ROOT)/docs/console \
		$(GO) test -race -count=1 -timeout 10m -run '^TestConsoleInBrowser$$' ./test

.PHONY: test-short
test-short: ## unit tests only (no engines needed), with the race detector
	$(GO) test -race -short -count=1 ./...

.PHONY: fuzz
fuzz: ## run every fuzz target of the module, FUZZTIME each (default 30s), with the race detector
	@GO=$(GO) scripts/fuzz.sh

.PHONY: lint
lint: ## gofmt, go vet, go mod tidy -diff and golangci-lint (the pinned version, built into bin/ once)
	@scripts/ensure-golangci-lint.sh
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) mod tidy -diff
	bin/golangci-lint run ./...

.PHONY: clean
clean: ## remove build output and the dev data dir
	rm -rf bin/gantry .gantry
