# Bothy: make run starts the development server, make test runs every test.
SHELL := /bin/bash
GO    ?= go

.PHONY: run test generate check-generated assets audit-deps lint-deps audit-graphql bench migrate build vet dist

## run: build bin/bothy and run the development server on the embedded database with the example world
# bin/bothy runs in the foreground, so Ctrl-C reaches it and it exits 0.
run: build
	bin/bothy dev

## test: every test (vet, generated code current, unit, integration, audit)
test: assets audit-deps lint-deps
	$(GO) vet ./...
	test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: the files above are not formatted"; exit 1; }
	$(MAKE) check-generated
	$(GO) test -count=1 -timeout 20m ./...

## generate: regenerate every generated file (gqlgen, config doc, playground assets)
generate: assets
	$(GO) tool gqlgen generate
	$(GO) tool gqlgen generate --config internal/gqlfloor/gqlgen.yml
	$(GO) run ./cmd/bothy config markdown > docs/configuration.md

## check-generated: fail when checked-in generated code differs from make generate
check-generated:
	@before="$$(cat $(GENERATED) | sha256sum)"; \
	$(MAKE) --no-print-directory generate >/dev/null; \
	after="$$(cat $(GENERATED) | sha256sum)"; \
	if [ "$$before" != "$$after" ]; then echo "generated code was stale: make generate changed it; commit the result"; exit 1; fi

GENERATED = graph/generated/generated.go graph/model/models_gen.go internal/gqlfloor/generated.go internal/gqlfloor/models_gen.go docs/configuration.md

## assets: the GraphiQL and React browser builds (npm, pinned) for the playground
assets:
	internal/playground/fetch-assets.sh

## audit-deps: the graphql-http audit tool and the graphql-ws test client (npm, pinned)
audit-deps:
	internal/graphqlaudit/install.sh
	internal/graphqlws/install.sh

## lint-deps: the OpenAPI linters redocly and spectral (npm, pinned), run by internal/apilint's tests
lint-deps:
	internal/apilint/install.sh

## audit-graphql: the GraphQL-over-HTTP audit (graphql-http auditServer) against a real server
audit-graphql: assets audit-deps
	$(GO) test -count=1 -run TestGraphQLOverHTTPAudit -v ./internal/server/

## bench: benchmarks (numbers go to docs/performance.md)
bench: assets
	$(GO) test -run '^$$' -bench . -benchmem ./...

## migrate: apply pending migrations to database.url (or to the database of the running bothy dev)
migrate: build
	bin/bothy migrate

## build: the binary bin/bothy, with the playground assets embedded
build: assets
	$(GO) build -o bin/bothy ./cmd/bothy

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

vet:
	$(GO) vet ./...
