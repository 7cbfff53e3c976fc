# Bothy: make run starts the development server, make test runs every test.
SHELL := /bin/bash
GO    ?= go

.PHONY: run test lint stress chaos conformance-matrix generate check-generated assets audit-deps lint-deps audit-graphql bench bench-injection bench-capacity migrate build vet dist image sdk-api-snapshot sdk-typescript sdk-python

## run: build bin/bothy and run the development server on the embedded database with the example world
# bin/bothy runs in the foreground, so Ctrl-C reaches it and it exits 0.
run: build
	bin/bothy dev

# TEST_START is when this make began (:= is evaluated once, at start), so
# the budget line of make test counts the installs and checks too.
TEST_START := $(shell date +%s)
# TEST_BUDGET is the wall-time budget of make test in seconds (docs/reliability.md).
TEST_BUDGET ?= 240
# TEST_PARALLEL is how many tests of one package run at once: the tests
# that own their database mostly wait on the network and PostgreSQL, so
# more run at once than the machine has cores.
TEST_PARALLEL ?= 8
# TEST_PACKAGES is how many test packages run at once (go test -p; its
# default is the number of cores): the slowest packages (the conformance
# kit, the adapter's end-to-end tests, the clients' doc test) mostly wait on
# leases, processes, npm and PostgreSQL, so four at once finish sooner on
# two cores; eight were a little faster still, but the tests that count a
# whole server's statements saw more of the others' work
# (docs/reliability.md#time).
TEST_PACKAGES ?= 4
TEST_EVENTS = bin/test-events.json
# TEST_BINARIES keeps the test binaries between runs: internal/devtools/testrun
# runs the tests as go test -count=1 does but links a package's binary only
# when its code changed (go test links all 69 at every run: 120 s of CPU).
# It also holds the one bothy that the tests which start bothy run
# (BOTHY_TEST_BOTHY, internal/devtools/gobuild).
TEST_BINARIES = bin/testbins
# TEST_FIRST are the test packages that take longest, slowest first (the
# "slowest packages" make test prints): testrun starts packages in the order
# it is given them, so the long ones must not wait behind short ones and end
# last. ./... after them adds every other package once. The heap bound
# (internal/server/heapbound) is not among them although it is long under
# load: it is one goroutine of parsing, 10 s alone on an idle core and
# 80 s when it starts beside the four heaviest; late, it runs while the
# short packages mostly link and leave a core free.
TEST_FIRST = ./internal/examples ./internal/server ./internal/conformance ./internal/runs ./internal/agentflow ./internal/devtools/clientflow ./cmd/bothy

## test: every test (vet, generated code current, unit, integration, audit), then the time budget
# The three npm installs run side by side. go vet only reads the tree, so
# it runs beside the tests (its compiles are the tests' too), once with its
# own analyzers and once with the project's (internal/devtools/lint, through
# bin/bothyvet: vet caches their results per package); generated
# code is checked before them, because make generate rewrites files the
# tests compile. A vet finding fails make test like a failing test. The
# test processes share one PostgreSQL cluster (internal/devtools/testcluster), so
# that the template is migrated once, not once per package.
# Tests compile like make build (static, -trimpath), so the binaries the
# tests build (make build in the README's quick start, make dist, the
# kit's and the clients' go build) reuse the tests' compiles instead of
# compiling everything a second way. They link without DWARF (-w: stack
# traces keep their files and lines): linking some seventy test binaries
# and a dozen of bothy is a good part of make test's time on two cores, and
# DWARF is a good part of a link (docs/reliability.md#time).
test: export CGO_ENABLED := 0
# GOGC=400 for every Go program of the run (the test binaries, the servers
# they start, the compiler, the linker, the linters): the run is bound by
# CPU on two cores and has memory to spare, and a quarter of the collector's
# work goes (internal/server's tests: 19 s of CPU instead of 21 to 24 s).
# No test reads the heap without a runtime.GC first.
test: export GOGC := 400
test: export GOFLAGS := -trimpath "-ldflags=-s -w" $(GOFLAGS)
test:
	$(MAKE) --no-print-directory -j3 assets audit-deps lint-deps sdk-typescript sdk-python
	test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: the files above are not formatted"; exit 1; }
	$(MAKE) check-generated
	@mkdir -p bin $(TEST_BINARIES)
	$(GO) build -buildvcs=false -o $(TEST_BINARIES)/bothy ./cmd/bothy
	@export BOTHY_TEST_BOTHY=$(CURDIR)/$(TEST_BINARIES)/bothy; \
	{ $(GO) vet ./... ./sdk/... && $(GO) vet -tags chaos ./internal/devtools/chaos/ && \
		$(GO) build -o bin/bothyvet ./internal/devtools/lint/cmd/bothyvet && $(GO) vet -vettool=$(CURDIR)/bin/bothyvet ./... ./sdk/...; } > bin/vet.log 2>&1 & vet=$$!; \
	$(MAKE) --no-print-directory lint > bin/lint.log 2>&1 & lint=$$!; \
	{ $(GO) test -c -tags chaos -o $(TEST_BINARIES)/chaos-smoke.test ./internal/devtools/chaos/ && cd internal/devtools/chaos && \
		CHAOS_RUNS=2 CHAOS_BUDGET=15s $(CURDIR)/$(TEST_BINARIES)/chaos-smoke.test -test.count=1 -test.v -test.timeout 5m -test.run '^TestChaos$$'; } > bin/chaos-smoke.log 2>&1 & chaos=$$!; \
	$(GO) run ./internal/devtools/testcluster -- $(GO) tool gotestsum --format pkgname-and-test-fails --jsonfile $(TEST_EVENTS) --raw-command -- \
		$(GO) run ./internal/devtools/testrun -dir $(TEST_BINARIES) -p $(TEST_PACKAGES) -parallel $(TEST_PARALLEL) -timeout 20m $(TEST_FIRST) ./... ./sdk/...; status=$$?; \
	if wait $$vet; then echo "go vet ./... (and -tags chaos, and bothyvet's rules): no findings"; else cat bin/vet.log; echo "go vet ./... failed"; status=1; fi; \
	if wait $$lint; then echo "golangci-lint (make lint): no findings"; else cat bin/lint.log; echo "make lint failed"; status=1; fi; \
	if wait $$chaos; then echo "chaos smoke (CHAOS_RUNS=2 CHAOS_BUDGET=15s): passed, $$(sed -n 's/.*chaos: \(the run took [^:]*\):.*/\1/p' bin/chaos-smoke.log)"; else cat bin/chaos-smoke.log; echo "chaos smoke failed: make chaos would fail too"; status=1; fi; \
	$(GO) run ./internal/devtools/testbudget -json $(TEST_EVENTS) -since $(TEST_START) -budget $(TEST_BUDGET); \
	exit $$status

# GOLANGCI runs golangci-lint, pinned as a Go tool in a modfile of its own
# (internal/devtools/lint/golangci/go.mod), so that its dependencies stay out of the
# server's go.mod; -modfile needs GOWORK=off, so each module of go.work is
# linted on its own. go tool caches the built linter, golangci-lint its
# results (in the default cache), so a warm run only reads what changed;
# GOFLAGS is emptied so that make test (-trimpath) shares both caches with
# make lint.
GOLANGCI = GOWORK=off GOFLAGS= $(GO) tool -modfile=$(CURDIR)/internal/devtools/lint/golangci/go.mod golangci-lint run --config $(CURDIR)/.golangci.yml

## lint: golangci-lint (.golangci.yml: function length, complexity, exhaustive enum switches, doc comments, error wrapping, staticcheck) on the root module and sdk/
lint:
	$(GOLANGCI) ./...
	cd sdk && $(GOLANGCI) ./...

# STRESS_COUNT is how often make stress runs each test it names.
STRESS_COUNT ?= 50
# The tests that touch concurrency, timing, WebSockets, outages or leases,
# by package (docs/reliability.md#stability).
STRESS_SERVER  = ^(TestSubscription.*|TestLiveRightsOnSubscriptions|TestWebSocketCloseCodes|TestRequestsRefusedBeforeTheyRun|TestCostsAndLimitsVisible|TestDatabaseOutage|TestFrozenDatabaseAnswers|TestReadiness.*|TestRateLimitHoldsAcrossReplicas|TestSlowClientsAreCut|TestConcurrencyCap.*|TestAdminDisableEndsPollsAndRuns|TestRunTimeoutLoggedAndCounted|TestPgBouncerTransactionMode|TestMetricsOwnListener|TestAmplificationHeapBound|TestListEventsSameOnBothFaces|TestCursorExpiredOnBothFaces)$$
STRESS_RUNS    = ^(TestFencing_.*|TestDeliveryWaitsForTheRunsEnd|TestLossOfTrigger.*|TestCancelRequestedRunNeverRequeued|TestSweepSettlesPastARunItCannot|TestConcurrentTriggersOneActiveRun|TestAnswer_ConcurrentWithFinish|TestRunClaimsAndLeases|TestRunTimeouts|TestLongPoll.*|TestFollowupDelivery|TestLossOfTriggerEndsRuns|TestPromotionDecidesAgain|TestCancelRun.*|TestAgentCursor|TestLargeAnswersKeepTheirBytes|TestRunContext_ConstantQueries|TestLiveBox_.*|TestApprovals_.*)$$
STRESS_STREAM  = ^(TestHubAwaitWaiting)$$
STRESS_ADAPTER = ^(TestFollowUp.*|TestReply.*|TestTwoAdapterProcesses|TestTwoAdaptersOneAgent|TestTakeoverAfterCrash|TestAdapterOverWebSocket.*|TestAdaptersOverBothTransports|TestAdapterEndToEnd.*|TestLoop.*|TestOpenAIFlow.*|TestEchoModelHonoursCancellation|TestOutbox.*|TestMaxConcurrent|TestAutoTransportFallsBackToThePoll|TestRunWithHandler|TestLiveStreamsIntoTheBox|TestLiveStopDuringStream)$$
STRESS_SDK     = ^(TestAcks.*|TestClientTimeoutAndCancellation)$$
STRESS_MODEL   = ^(TestOpenAIModelTimeout|TestOpenAIModelCancel)$$
STRESS_OTHER   = ^(TestMoveSpendsOneToken|TestOneTokenPerOperation|TestLookupAtTheDoor|TestInTx.*|TestLimitsBound.*|TestMigrateIsIdempotentAndConcurrent|TestMemoryBuckets|TestReservationCancel|TestSpend|TestMemoryAnswersAtOnce|TestFanoutStatementsDoNotGrowWithListeners)$$

## stress: the concurrency, timing, WebSocket, outage and lease tests STRESS_COUNT times each, the statement-order test 200 times
stress: assets audit-deps
	$(GO) test -count=200 -parallel $(TEST_PARALLEL) -timeout 60m -run '^TestHiddenAndMissingTakeTheSameStatements$$' ./internal/server/
	$(GO) test -count=$(STRESS_COUNT) -parallel $(TEST_PARALLEL) -timeout 120m -run '$(STRESS_SERVER)' ./internal/server/
	$(GO) test -count=$(STRESS_COUNT) -parallel $(TEST_PARALLEL) -timeout 120m -run '$(STRESS_RUNS)' ./internal/runs/
	$(GO) test -count=$(STRESS_COUNT) -parallel $(TEST_PARALLEL) -timeout 120m -run '$(STRESS_STREAM)' ./internal/runs/stream/
	$(GO) test -count=$(STRESS_COUNT) -parallel $(TEST_PARALLEL) -timeout 120m -run '$(STRESS_ADAPTER)' ./internal/agentflow/
	$(GO) test -count=$(STRESS_COUNT) -parallel $(TEST_PARALLEL) -timeout 120m -run '$(STRESS_SDK)' ./sdk/agent/
	$(GO) test -count=$(STRESS_COUNT) -parallel $(TEST_PARALLEL) -timeout 120m -run '$(STRESS_MODEL)' ./sdk/model/openai/
	$(GO) test -count=$(STRESS_COUNT) -parallel $(TEST_PARALLEL) -timeout 120m -run '$(STRESS_OTHER)' ./internal/authz/ ./internal/platform/db/ ./internal/ratelimit/ ./internal/chat/ ./internal/feed/

## chaos: the chaos test of runs (internal/devtools/chaos, build tag chaos; make test runs a smoke of it with CHAOS_RUNS=2 CHAOS_BUDGET=15s, bounded by that budget): adapter processes of one agent killed and suspended at random while people write; every run must end once and every request get one answer (CHAOS_SEED replays a schedule)
chaos: assets sdk-python sdk-typescript
	$(GO) test -tags chaos -count=1 -v -timeout 10m -run '^(TestChaos|TestFreshAdapterLearnsTheAcknowledgedPosition)$$' ./internal/devtools/chaos/

## conformance-matrix: every single-fault adapter of internal/conformance/testdata/broken against every scenario of the conformance kit (make test runs each against its own scenarios and a control): each must fail exactly the scenarios of its rule, the reference adapter none
conformance-matrix:
	BOTHY_CONFORMANCE_MATRIX=1 $(GO) test -count=1 -v -timeout 60m -run '^TestKit$$' ./internal/conformance/

## generate: regenerate every generated file (gqlgen, config doc, playground assets)
generate: assets
	$(GO) tool gqlgen generate
	$(GO) tool gqlgen generate --config internal/devtools/gqlfloor/gqlgen.yml
	$(GO) run ./cmd/bothy config markdown > docs/configuration.md

## check-generated: fail when checked-in generated code differs from make generate
# It runs make generate only when a file the generators read or write has
# changed since its last clean pass (bin/generated.stamp holds a hash of their
# contents): a warm make test saves the 14 s of loading every package.
check-generated:
	@key="$$(git ls-files -co --exclude-standard -z '*.go' '*.graphqls' '*.yml' '*.yaml' go.mod go.sum $(GENERATED) | sort -z | xargs -0 sha256sum | sha256sum)"; \
	if [ -f bin/generated.stamp ] && [ "$$(cat bin/generated.stamp)" = "$$key" ]; then exit 0; fi; \
	before="$$(cat $(GENERATED) | sha256sum)"; \
	$(MAKE) --no-print-directory generate >/dev/null; \
	after="$$(cat $(GENERATED) | sha256sum)"; \
	if [ "$$before" != "$$after" ]; then echo "generated code was stale: make generate changed it; commit the result"; exit 1; fi; \
	mkdir -p bin && echo "$$key" > bin/generated.stamp

GENERATED = graph/generated/generated.go graph/model/models_gen.go internal/devtools/gqlfloor/generated.go internal/devtools/gqlfloor/models_gen.go docs/configuration.md

## assets: the GraphiQL and React browser builds (npm, pinned) for the playground
assets:
	internal/playground/fetch-assets.sh

## audit-deps: the graphql-http audit tool, the graphql-ws test client and the MCP clients (TypeScript SDK, Inspector CLI, conformance suite) (npm, pinned)
audit-deps:
	internal/devtools/graphqlaudit/install.sh
	internal/devtools/graphqlws/install.sh
	internal/mcpface/js/install.sh

## lint-deps: the OpenAPI linters redocly and spectral (npm, pinned), run by internal/devtools/apilint's tests
lint-deps:
	internal/devtools/apilint/install.sh

## sdk-typescript: the TypeScript SDK @bothy/agent (sdk/typescript): npm ci from its lock when the lock changed, npm run build when its sources changed
sdk-typescript:
	sdk/typescript/install.sh

## sdk-python: a virtualenv bin/python-sdk with the Python SDK's locked packages (pip --require-hashes) and the SDK itself, for internal/examples' Python tests
sdk-python:
	sdk/python/venv.sh bin/python-sdk

## sdk-api-snapshot: store the Go SDK's exported API in sdk/api, the base of its compatibility gate (internal/devtools/apicompat); run it at each release
sdk-api-snapshot:
	rm -f sdk/api/*.export
	$(GO) run ./internal/devtools/apicompat/cmd/goapisnapshot -dir sdk -o sdk/api ./...

## audit-graphql: the GraphQL-over-HTTP audit (graphql-http auditServer) against a real server
audit-graphql: assets audit-deps
	$(GO) test -count=1 -run TestGraphQLOverHTTPAudit -v ./internal/server/

## bench: benchmarks (numbers go to docs/performance.md)
bench: assets
	$(GO) test -run '^$$' -bench . -benchmem ./...

## bench-injection: the injection bench in full (bothy bench injection with the obedient model; figures in docs/reliability.md#injection-bench)
bench-injection: assets
	$(GO) run ./cmd/bothy bench injection

# BENCH_CAPACITY_FLAGS are passed to bothy bench capacity (e.g. --base 2,40,1
# --step 15s --max-level 64); BENCH_CAPACITY_DATA is the bothy dev it starts.
BENCH_CAPACITY_FLAGS ?=
BENCH_CAPACITY_DATA  ?= .bothy-bench

## bench-capacity: bothy bench capacity against a bothy dev of its own (127.0.0.1:18080, limits raised, pprof on 18081; docs/performance.md)
# The rate limits and the connections per principal are raised so that the
# bench measures the server, not its limits; the postmaster's pid comes from
# its pid file (pg_ctl daemonizes it), so its backends' CPU is sampled too.
bench-capacity: build
	@mkdir -p $(BENCH_CAPACITY_DATA)
	@BOTHY_RATELIMIT_RL_MESSAGE_BURST=100000 BOTHY_RATELIMIT_RL_MESSAGE_PER_MINUTE=1000000 \
	BOTHY_RATELIMIT_RL_READ_BURST=100000 BOTHY_RATELIMIT_RL_READ_PER_MINUTE=1000000 \
	BOTHY_RATELIMIT_RL_AGENT_RUNTIME_BURST=100000 BOTHY_RATELIMIT_RL_AGENT_RUNTIME_PER_MINUTE=1000000 \
	BOTHY_WEBSOCKET_MAX_CONNECTIONS_PER_PRINCIPAL=100000 BOTHY_HTTP_MAX_CONCURRENT_PER_PRINCIPAL=256 \
	BOTHY_METRICS_ADDR=127.0.0.1:18081 BOTHY_METRICS_PPROF=true \
		bin/bothy dev --data $(BENCH_CAPACITY_DATA) --addr 127.0.0.1:18080 > $(BENCH_CAPACITY_DATA)/dev.log 2>&1 & dev=$$!; \
	trap 'kill $$dev; wait $$dev' EXIT; \
	for i in $$(seq 120); do curl -sf http://127.0.0.1:18080/readyz > /dev/null && break; sleep 1; done; \
	bin/bothy bench capacity --server http://127.0.0.1:18080 --world $(BENCH_CAPACITY_DATA)/world.json \
		--pprof http://127.0.0.1:18081 --server-pid $$dev --db-pid $$(head -1 $(BENCH_CAPACITY_DATA)/postgres/pgdata/postmaster.pid) $(BENCH_CAPACITY_FLAGS)

## migrate: apply pending migrations to database.url (or to the database of the running bothy dev)
migrate: build
	bin/bothy migrate

# bin/bothy is built like make dist (static, -trimpath) but without the
# version stamps: the same compiled packages serve both, whatever folder the
# clone is in (TestREADMEQuickStart builds in a fresh clone beside
# TestBinary's dist).
## build: the binary bin/bothy, with the playground assets embedded
build: assets
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/bothy ./cmd/bothy

## dist: a static, version-stamped release binary dist/bothy-VERSION-GOOS-GOARCH (bothy version prints both stamps)
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DISTDIR  ?= dist
VERSION_PKG = bothy.example.com/bothy/internal/platform/version
dist: assets
	mkdir -p $(DISTDIR)
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false \
		-ldflags "-s -w -X $(VERSION_PKG).Stamp=$(VERSION) -X $(VERSION_PKG).StampRevision=$(REVISION)" \
		-o $(DISTDIR)/bothy-$(VERSION)-$$($(GO) env GOOS)-$$($(GO) env GOARCH) ./cmd/bothy

## image: an OCI image of the static linux binary of make dist, without a Docker daemon: the OCI layout dist/image/ and dist/bothy-image.tar for docker load (deploy/kubernetes/README.md)
# IMAGE_REPOSITORY:VERSION names the image (deploy/kubernetes uses the
# same repository). IMAGE_ARCH is the architecture of the binary and the
# image. IMAGE_CA_CERTIFICATES is the build machine's CA bundle, copied into
# the image when it exists (IMAGE_CA_CERTIFICATES= leaves it out).
# SOURCE_DATE_EPOCH is the commit time, so a rebuild of one commit on one
# machine gives the same digest.
IMAGE_REPOSITORY      ?= registry.example.com/bothy
IMAGE_ARCH            ?= $(shell $(GO) env GOARCH)
IMAGE_CA_CERTIFICATES ?= /etc/ssl/certs/ca-certificates.crt
SOURCE_DATE_EPOCH     ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 1)
image:
	GOOS=linux GOARCH=$(IMAGE_ARCH) $(MAKE) --no-print-directory dist VERSION=$(VERSION) REVISION=$(REVISION)
	rm -rf $(DISTDIR)/image $(DISTDIR)/bothy-image.tar
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./internal/devtools/ociimage/cmd/ociimage \
		-binary $(DISTDIR)/bothy-$(VERSION)-linux-$(IMAGE_ARCH) -version $(VERSION) -revision $(REVISION) \
		-repository $(IMAGE_REPOSITORY) -ca-certificates "$(wildcard $(IMAGE_CA_CERTIFICATES))" \
		-out $(DISTDIR)/image -tar $(DISTDIR)/bothy-image.tar

vet:
	$(GO) vet ./...

## manifests: render every overlay of deploy/kubernetes, alone and with each component, and validate it offline for Kubernetes 1.27 and the newest release, alerts through promtool (make test does it too; deploy/kubernetes/README.md)
# The tool is a module of its own, outside go.work; GOFLAGS are the
# server's.
.PHONY: manifests
manifests:
	cd deploy/kubernetes/check && GOWORK=off GOFLAGS= $(GO) run . && GOWORK=off GOFLAGS= $(GO) run -modfile=go.127.mod .
