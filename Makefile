# gantry — `make run` starts a single-machine gantry, `make test` proves it.
# Both install or start what is missing (Docker engine, Postgres, the sandbox
# image, the S3 server) and are safe to run again.

SHELL   := /bin/bash
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
ROOT    := $(CURDIR)

export GANTRY_VERSITYGW_BIN ?= $(ROOT)/bin/versitygw

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

.PHONY: image
image: docker ## build the sandbox image offline from Debian packages (if missing)
	@images/sandbox/build.sh

.PHONY: gantry-image
gantry-image: docker ## build the gantry image offline from a static binary (gantry:<version> and :latest)
	@deploy/docker/build.sh

.PHONY: deploy-check
deploy-check: ## validate deploy/: compose file (docker-compose config), Helm chart (helm template + kubeconform -strict)
	@scripts/deploy-check.sh

.PHONY: deps
deps: docker postgres versitygw image ## everything run and test need

.PHONY: run
run: deps build ## start gantry in dev mode on 127.0.0.1:8080
	exec bin/gantry dev

.PHONY: test
test: deps build deploy-check ## run every test against the real engines, and validate deploy/
	GANTRY_TEST_REQUIRE=1 GANTRY_BIN=$(ROOT)/bin/gantry \
		$(GO) test -count=1 -timeout 20m ./...

.PHONY: bench
bench: deps build ## measure gantry against plain docker run; prints a table, writes bench-results.json
	$(GO) run ./bench -gantry bin/gantry

.PHONY: test-short
test-short: ## unit tests only (no engines needed)
	$(GO) test -short -count=1 ./...

.PHONY: fuzz
fuzz: ## run each fuzz target for 30s
	$(GO) test ./jobs -run '^$$' -fuzz FuzzDecodeRequest -fuzztime 30s
	$(GO) test ./runner -run '^$$' -fuzz FuzzArtifactTar -fuzztime 30s
	$(GO) test ./skills -run '^$$' -fuzz FuzzParse -fuzztime 30s
	$(GO) test ./runner -run '^$$' -fuzz FuzzAgentFrames -fuzztime 30s
	$(GO) test ./ingress -run '^$$' -fuzz FuzzEntryInfo -fuzztime 30s
	$(GO) test ./pii -run '^$$' -fuzz FuzzTokenizeRoundTrip -fuzztime 30s

.PHONY: lint
lint: ## gofmt and go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	cd deploy/tools && $(GO) vet ./k8sschema

.PHONY: clean
clean: ## remove build output and the dev data dir
	rm -rf bin/gantry .gantry
