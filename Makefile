# pulumi-talos-proxmox — see README.md.
#
# The Pulumi toolchain (CLI and language hosts) and golangci-lint are built from the Go module
# proxy by tools/toolchain/build.sh and tools/lint/build.sh into a per-user cache keyed by
# version; a warm machine skips them.
#
# Go modules: the provider (repository root), the lab and its end-to-end tests (lab/, never
# imported by the provider), the lab's bridged bpg provider (lab/proxmoxve) and its contract tests
# (lab/pvecontract), the examples (examples/go, examples/automation, examples/fleet) and tools/*.

SHELL        := bash
.SHELLFLAGS  := -euo pipefail -c
.DEFAULT_GOAL := help

GO           ?= go
# Every Go build and test compiles as a release does (static, -trimpath): the go command's cache
# keys include both, so one setting for all lets the plugin, the lab, the tests, the examples and
# the toolchain share every compiled dependency (grpc, Kubernetes, Pulumi, Talos machinery), which
# would otherwise each be compiled twice on a cold machine. The go command's own GOFLAGS (its
# environment or `go env -w`) are kept.
export CGO_ENABLED := 0
export GOFLAGS     := $(strip $(shell $(GO) env GOFLAGS) -trimpath)
# The plugin's version is written once, in provider/VERSION.
VERSION      := $(shell cat provider/VERSION)
PLUGIN       := bin/pulumi-resource-talos-proxmox
CACHE        := $(CURDIR)/.cache
# An installed Pulumi (v3, not older than the pinned one, its language hosts beside it) is used
# instead of building one: PULUMI (environment or make's command line), else `pulumi` on PATH
# (tools/toolchain/README.md). make before 4.4 gives $(shell) no command-line variables: passed.
TOOLCHAIN    := $(shell PULUMI='$(PULUMI)' tools/toolchain/build.sh --print-dir)
PULUMI_CLI   := $(TOOLCHAIN)/pulumi
LINT         := $(shell tools/lint/build.sh --print-dir)/golangci-lint
FUZZTIME     ?= 30s
# Go modules that unit tests cover, besides the root: the examples' (unit), the lab's (lab-unit,
# which start the lab's Kubernetes control plane); golangci-lint covers these and more.
EXAMPLE_MODULES := examples/automation examples/fleet
LAB_MODULES     := lab lab/proxmoxve lab/pvecontract
MODULES         := $(LAB_MODULES) $(EXAMPLE_MODULES)
# tools/kube (one main.go dispatching to k8s.io/kubernetes) is left to gofmt: golangci-lint would
# type-check all of Kubernetes for it, about 7 minutes cold.
LINT_MODULES := $(MODULES) examples/go tools/sdkgen tools/sdkcheck tools/fluxgen

# Pulumi never touches the user's own state or plugins, never calls home and never downloads
# plugins: everything it needs is built here.
export PULUMI_HOME                         := $(CACHE)/pulumi-home
# metadata=skip: no attributes sidecar per state file, which the file backend writes in place and
# a killed `up` can leave empty (docs/operations.md, "An interrupted up").
export PULUMI_BACKEND_URL                  := file://$(CACHE)/backend?metadata=skip
export PULUMI_CONFIG_PASSPHRASE            := talos-proxmox-local
export PULUMI_SKIP_UPDATE_CHECK            := 1
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION := true
export PULUMI_TOOLCHAIN_BIN                := $(TOOLCHAIN)
export TALOS_PROXMOX_PLUGIN                := $(CURDIR)/$(PLUGIN)
export TALOS_PROXMOX_VERSION               := $(VERSION)
export TALOS_LAB_BIN                       := $(CURDIR)/bin/lab
# The lab's Kubernetes control plane (kube-apiserver, -controller-manager, -scheduler in one binary),
# unless the user gives one of the pinned version (`make kube` checks it; tools/kube/README.md).
ifeq ($(origin TALOS_KUBE_BIN),undefined)
TALOS_KUBE_BIN := $(shell tools/kube/build.sh --print-dir)/kube
else
override TALOS_KUBE_BIN := $(abspath $(TALOS_KUBE_BIN))
endif
export TALOS_KUBE_BIN
# An S3-compatible server (versitygw) for the state-backend test.
export TALOS_S3_BIN                        := $(shell tools/versitygw/build.sh --print-dir)/versitygw
# Helm charts the component renders are cached here, not in the user's cache.
export TALOS_PROXMOX_HELM_CACHE            := $(CACHE)/helm

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

.PHONY: tools
tools: ## Build the pinned Pulumi CLI, language hosts, golangci-lint, the lab's Kubernetes and versitygw (cached by version)
	@# The builds run side by side: cold, much of each is module download and linking, which
	@# leave a core idle. Each one's own messages go to stderr; a failure fails the target.
	@PULUMI='$(PULUMI)' tools/toolchain/build.sh >/dev/null & t=$$!; \
	 tools/lint/build.sh >/dev/null & l=$$!; \
	 tools/kube/build.sh >/dev/null & k=$$!; \
	 tools/versitygw/build.sh >/dev/null & s=$$!; \
	 rc=0; wait $$t || rc=1; wait $$l || rc=1; wait $$k || rc=1; wait $$s || rc=1; exit $$rc

.PHONY: toolchain
toolchain: ## Build the pinned Pulumi CLI and language hosts (cached by version), unless an installed one is used
	@PULUMI='$(PULUMI)' tools/toolchain/build.sh >/dev/null

.PHONY: lint-tools
lint-tools: ## Build the pinned golangci-lint (cached by version)
	@tools/lint/build.sh >/dev/null

.PHONY: kube
kube: ## Build the pinned Kubernetes control plane for the lab (cached by version)
	@tools/kube/build.sh >/dev/null

.PHONY: cold-tools
cold-tools: ## Time every tool's build from empty caches in a temporary HOME (wall and CPU; 21–26 min on 2 cores)
	tools/coldtools.sh

.PHONY: versitygw
versitygw: ## Build the pinned versitygw, the S3 server the state-backend test keeps state in (cached by version)
	@tools/versitygw/build.sh >/dev/null

.PHONY: provider
provider: ## Build the plugin into bin/
	@# Built as a release builds it (static, -trimpath: see GOFLAGS above), so the release test reuses the compiled packages.
	$(GO) build -o $(PLUGIN) ./provider/cmd/pulumi-resource-talos-proxmox

.PHONY: lab
lab: ## Build the lab's plugins into bin/lab/ (never shipped): talos stand-in, bridged bpg proxmoxve
	$(GO) -C lab build -o $(CURDIR)/bin/lab/pulumi-resource-talos ./cmd/pulumi-resource-talos
	lab/proxmoxve/build.sh bin/lab/pulumi-resource-proxmoxve

.PHONY: schema
schema: toolchain provider ## Regenerate schema.json from the built plugin
	$(PULUMI_CLI) package get-schema ./$(PLUGIN) > schema.json.tmp
	mv schema.json.tmp schema.json

.PHONY: sdk
sdk: ## Regenerate sdk/{go,nodejs,python} from schema.json
	$(GO) -C tools/sdkgen run . -schema ../../schema.json -out ../../sdk

.PHONY: docs
docs: ## Regenerate docs/configuration.md from the provider's schema
	$(GO) test ./provider/checks -count=1 -run '^TestConfigurationDocIsCurrent$$' -update-docs

.PHONY: codegen
codegen: schema sdk docs ## Regenerate every generated file (schema.json, sdk/, docs/configuration.md)

.PHONY: lint
lint: lint-tools ## gofmt, and golangci-lint (govet, staticcheck, errcheck, doc comments, architecture rules) on every module
	@test -z "$$(gofmt -l provider examples lab tools)" || { gofmt -l provider examples lab tools; echo "run gofmt -w"; exit 1; }
	$(LINT) run ./...
	@for m in $(LINT_MODULES); do echo "golangci-lint: $$m"; (cd $$m && $(LINT) run --build-tags e2e ./...) || exit 1; done

.PHONY: unit
unit: ## Unit, Construct, schema and docs tests of the provider and the examples (no toolchain, no Kubernetes)
	$(GO) test -count=1 ./...
	@for m in $(EXAMPLE_MODULES); do echo "go test: $$m"; $(GO) -C $$m test -count=1 ./... || exit 1; done
	$(GO) -C tools/fluxgen test -count=1 ./... # the built-in Flux manifests are the ones the generator makes

.PHONY: lab-unit
lab-unit: kube ## The lab's own tests: the Proxmox fake and its contract with bpg, the Talos emulator, the lab's Kubernetes
	@for m in $(LAB_MODULES); do echo "go test: $$m"; $(GO) -C $$m test -count=1 ./... || exit 1; done

.PHONY: sdk-check
sdk-check: ## Fail on stale sdk/; build and type-check the SDKs and the examples in every language
	$(GO) -C tools/sdkgen run . -schema ../../schema.json -out ../../sdk -check
	$(GO) -C tools/sdkgen vet ./...
	$(GO) -C tools/sdkgen test -count=1 ./...
	$(GO) -C examples/go build -o /dev/null .
	$(GO) -C examples/go vet .
	tools/sdkcheck/check.sh

.PHONY: fuzz
fuzz: ## Fuzz input validation for FUZZTIME
	$(GO) test ./provider/internal/spec -run '^$$' -fuzz FuzzBuild -fuzztime $(FUZZTIME)

.PHONY: e2e
e2e: toolchain kube versitygw provider lab ## Tests through the real Pulumi CLI, the built plugin and the lab (RUN=<regexp> for some)
	@mkdir -p .cache && rm -f .cache/e2e-summary.txt
	@# The console gets what a plain `go test` prints for failures, then the slowest tests;
	@# .cache/e2e.json keeps every event (each test's output and time) for a closer look.
	@# GOGC=400: every Go process of the tests (the lab, its Kubernetes, the Pulumi CLI and the
	@# plugins) collects garbage a quarter as often, trading memory for CPU on 2 cores; `make
	@# bench` keeps Go's default, as users run it (docs/performance.md).
	GOGC=400 TALOS_E2E_SUMMARY=$(CURDIR)/.cache/e2e-summary.txt $(GO) -C lab test -json -count=1 -timeout 40m -parallel 3 -tags e2e $(if $(RUN),-run '$(RUN)') ./e2e/... \
		| tee .cache/e2e.json | tools/e2esummary/summary.py --out .cache/e2e-summary.txt

.PHONY: test
TEST_PHASES := tools provider lab lint unit lab-unit sdk-check fuzz e2e
test: ## Everything CI runs: set up the toolchain and pass all tests (each phase's time at the end)
	@# One phase after the other, as prerequisites would run them, timed, so a slow run says where.
	@times=""; for t in $(TEST_PHASES); do \
		start=$$(date +%s); $(MAKE) --no-print-directory $$t || { echo "make test: $$t failed after $$(( $$(date +%s) - start )) s"; exit 1; }; \
		times="$$times $$t=$$(( $$(date +%s) - start ))s"; \
	done; echo "make test: passed; phases:$$times"

.PHONY: release
release: toolchain ## Release packages of VERSION (make release VERSION=x.y.z; default provider/VERSION) into dist/: plugin archives for linux/darwin × amd64/arm64, Python wheel and sdist, npm tarball, Go SDK and its tag
	rm -rf dist
	PULUMI=$(PULUMI_CLI) tools/release/release.sh $(VERSION) dist

.PHONY: bench
bench: toolchain kube provider lab ## Benchmarks: Construct of 3/50/100 nodes; Cilium render vs helm template; one node's machine configuration; an etcd snapshot of 100 MiB (Take vs etcd's snapshot save); `up` of 3 and 9 nodes on the lab (and 5 ups of 9 for the spread); a no-op preview against a hand-written program; a preview of a change on 9 nodes with and without configuration diffs; a rolling Talos upgrade of 9 nodes; destroy of 5 nodes; clusters of 9, 25 and 50 nodes (up against its critical path, the processes' CPU and peak RSS, a no-op preview, a rolling upgrade against its floor); the lab's time and memory to a Ready cluster of 3 and 9 nodes
	$(GO) test -run '^$$' -bench BenchmarkConstruct -benchmem -count 3 ./provider/
	$(GO) test -run '^$$' -bench BenchmarkHelmRender -benchtime 1x -count 3 ./provider/internal/helmrender/
	$(GO) test -run '^$$' -bench BenchmarkGenerate -benchmem -count 3 ./provider/internal/machineconfig/
	$(GO) test -run '^$$' -bench BenchmarkSnapshot -benchtime 1x -count 3 ./provider/internal/etcdbackup/
	$(GO) -C lab test -tags e2e -run '^$$' -bench 'BenchmarkLabUp$$|BenchmarkDestroy' -benchtime 1x -count 3 ./e2e/
	$(GO) -C lab test -tags e2e -run '^$$' -bench 'BenchmarkRollingUpgrade/maxParallel=[13]$$' -benchtime 1x -count 3 ./e2e/
	$(GO) -C lab test -tags e2e -run '^$$' -bench 'BenchmarkRollingUpgrade/.*reboot=10s' -benchtime 1x -count 1 ./e2e/
	$(GO) -C lab test -tags e2e -run '^$$' -bench "BenchmarkPreview|BenchmarkLabUpSpread|BenchmarkDiffPreview" -benchtime 1x -count 1 ./e2e/
	$(GO) -C lab test -tags e2e -run '^$$' -bench 'BenchmarkScale$$' -benchtime 1x -count 1 -timeout 45m ./e2e/
	$(GO) -C lab test -run '^$$' -bench BenchmarkLabCluster -benchtime 1x -count 3 ./talosemu/

.PHONY: demo
demo: toolchain kube provider lab ## Set up and run the demo: pulumi up of the example cluster on the local lab
	$(GO) -C lab run ./cmd/lab-demo -example $(CURDIR)/examples/yaml -workdir $(CACHE)/demo

# Where `make lab-up` keeps the lab's Pulumi home, state, env.sh and stack-config.json.
TALOS_LAB_DIR ?= $(CACHE)/lab

.PHONY: lab-up
lab-up: toolchain kube provider lab ## Start the lab for your own programs; it runs until Ctrl-C or `make lab-down` (docs/lab.md)
	$(GO) -C lab build -o $(CURDIR)/bin/talos-lab ./cmd/lab
	exec bin/talos-lab up -dir $(TALOS_LAB_DIR)

.PHONY: lab-down
lab-down: ## Stop the lab `make lab-up` started
	$(GO) -C lab build -o $(CURDIR)/bin/talos-lab ./cmd/lab
	bin/talos-lab down -dir $(TALOS_LAB_DIR)

.PHONY: clean
clean: ## Remove build output and local Pulumi state
	rm -rf bin $(CACHE)
