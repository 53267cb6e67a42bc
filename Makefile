# aapd — the two commands that matter: `make run` and `make test`.

# The local development database (created on first run).
DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/aapd?sslmode=disable
ADDR ?= :8080
# The server the tests create their throwaway databases on: TEST_DATABASE_URL
# when set; else a PostgreSQL container (testcontainers) when Docker answers;
# else the local server below when it accepts connections; else make test
# stops and says what to do.
LOCAL_TEST_DATABASE_URL = postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable

.PHONY: run test test-citus test-faults-background test-faults-200 build lint bench fuzz

# Where make build (and so make run) puts the binary.
BIN ?= bin/aapd

## run: build, then start the server on $(ADDR) with the echo agent, creating and migrating the database, printing a dev API key; Ctrl-C stops it
# Not go run: it records no VCS revision (aapd_build_info), and it exits 1
# on Ctrl-C whatever the server does. exec: the shell would end by the
# Ctrl-C too, however cleanly the server stopped.
run: build
	DATABASE_URL='$(DATABASE_URL)' exec '$(BIN)' serve --addr '$(ADDR)' --create-database --dev

## test: vet and run every test with the race detector against real Postgres
test:
	go vet ./...
	@if [ -n "$$TEST_DATABASE_URL" ]; then \
	  echo "make test: tests run on TEST_DATABASE_URL"; \
	elif docker info >/dev/null 2>&1; then \
	  echo "make test: no TEST_DATABASE_URL; Docker answers: the tests start PostgreSQL with testcontainers"; \
	elif pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then \
	  echo "make test: no TEST_DATABASE_URL and no Docker; using the local PostgreSQL: $(LOCAL_TEST_DATABASE_URL)"; \
	  export TEST_DATABASE_URL='$(LOCAL_TEST_DATABASE_URL)'; \
	else \
	  echo "make test: no database: set TEST_DATABASE_URL=postgres://USER@HOST:5432/postgres (a user that may CREATE DATABASE), or start Docker"; exit 2; \
	fi; \
	$(MAKE) --no-print-directory interop-deps && \
	go test -race -count=1 -timeout 15m ./...

# The official npm clients and tools the interop tests drive: one npm project
# per interop/*/ directory that has a package-lock.json (pinned), each
# installed with npm ci before the tests run, so that a slow registry is not
# counted against a test package's timeout. Without npm the interop tests skip
# and say so; without Chromium, so does the sandbox-agent inspector test.
INTEROP_DIRS = $(patsubst %/package-lock.json,%,$(wildcard interop/*/package-lock.json))
.PHONY: interop-deps
interop-deps:
	@if ! command -v npm >/dev/null 2>&1; then \
	  echo "make test: no npm: the interop tests ($(INTEROP_DIRS)) will skip (install Node.js 20 or later to run them)"; \
	else \
	  for d in $(INTEROP_DIRS); do \
	    if [ -f $$d/node_modules/.package-lock.json ] && ! [ $$d/node_modules/.package-lock.json -ot $$d/package-lock.json ]; then continue; fi; \
	    echo "make test: installing the pinned packages of $$d (npm ci)"; \
	    npm ci --prefix $$d --no-audit --no-fund --fetch-timeout=60000 --fetch-retries=3 || \
	      { echo "make test: npm ci in $$d failed: the npm registry must be reachable to install its packages"; exit 1; }; \
	  done; \
	fi
	@if command -v "$${CHROMIUM:-chromium}" >/dev/null 2>&1; then \
	  echo "make test: Chromium found: the sandbox-agent inspector test runs"; \
	else \
	  echo "make test: no Chromium (apt-get install chromium, or set CHROMIUM): the sandbox-agent inspector test (TestSandboxAgentInspector) will SKIP"; \
	fi

## test-citus: run every suite that uses the database (the packages whose tests call storetest.Main) on Citus: CITUS_URL is a coordinator URL (docs/citus.md)
# Two runs: the packages other than cmd/aapd one at a time (-p 1: each
# creates its Citus databases on three nodes, and two at once only slow each
# other), then cmd/aapd's end-to-end suite alone, with a timeout for a
# loaded machine (it takes 15 to 25 minutes on two cores shared with other
# work, docs/citus.md). A package with a new storetest.Main joins the first
# run by itself.
CITUS_PACKAGES = $(filter-out ./cmd/aapd/,$(sort $(addprefix ./,$(dir $(shell grep -l 'storetest.Main' $$(git ls-files '*_test.go' 2>/dev/null) 2>/dev/null)))))
CITUS_TIMEOUT ?= 45m
test-citus:
	@if [ -z "$$CITUS_URL" ]; then \
	  echo "make test-citus: set CITUS_URL to a Citus coordinator whose database has the citus extension and its workers registered (docs/citus.md says how to start one on this machine)"; exit 2; \
	fi
	@test -n "$(CITUS_PACKAGES)" || { echo "make test-citus: no package with storetest.Main found (run it from a git checkout)"; exit 2; }
	$(MAKE) --no-print-directory interop-deps
	TEST_DATABASE_URL="$$CITUS_URL" go test -race -count=1 -p 1 -timeout 20m $(CITUS_PACKAGES)
	TEST_DATABASE_URL="$$CITUS_URL" go test -race -count=1 -timeout $(CITUS_TIMEOUT) ./cmd/aapd/

## test-faults-background: the full fault run of background turns: two replicas, 1,000 background turns, each replica SIGKILLed twice and PostgreSQL restarted twice (docs/background.md); make test runs a short one
test-faults-background:
	TEST_DATABASE_URL="$${TEST_DATABASE_URL:-$(LOCAL_TEST_DATABASE_URL)}" AAPD_FAULTS=full \
	  go test -count=1 -timeout 30m -run '^TestBackgroundTurnsUnderFaults$$' -v ./cmd/aapd/

## test-faults-200: the fault run at scale: 200 clients on two replicas, every first attempt abandoned, PostgreSQL crashed every 2 s; 0 lost, 0 duplicated, 0 wedged (docs/durability.md)
test-faults-200:
	TEST_DATABASE_URL="$${TEST_DATABASE_URL:-$(LOCAL_TEST_DATABASE_URL)}" AAPD_FAULTS=full \
	  go test -count=1 -timeout 30m -run '^TestTwoHundredClientsOnTwoReplicasUnderFaults$$' -v ./cmd/aapd/

# The VCS revision make build stamps into the binary, with -modified when
# the tree has changes. The Go toolchain records it too, but only from a
# .git directory: not in a git worktree (.git a file), nor for go run.
REVISION = $(shell r=$$(git rev-parse HEAD 2>/dev/null) && { test -z "$$(git status --porcelain 2>/dev/null)" || r=$$r-modified; echo $$r; })

## build: build bin/aapd, stamped with its VCS revision
build:
	go build -buildvcs=true -ldflags '-X main.revision=$(REVISION)' -o '$(BIN)' ./cmd/aapd

## lint: gofmt, go vet, and every relative link and #anchor of the Markdown files resolves
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "not gofmt'ed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	go run ./internal/mdlinks

## fuzz: run every fuzz target (go test -fuzz) for FUZZTIME each (default 30s) and say which found what; make test runs their seed corpora (testdata/fuzz) as ordinary tests
FUZZTIME ?= 30s
fuzz:
	@export TEST_DATABASE_URL="$${TEST_DATABASE_URL:-$(LOCAL_TEST_DATABASE_URL)}"; \
	log=$$(mktemp); summary=""; status=0; \
	for file in $$(grep -l '^func Fuzz' $$(git ls-files '*_test.go')); do \
	  pkg=./$$(dirname $$file); \
	  for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
	    echo "make fuzz: $$target in $$pkg for $(FUZZTIME)"; \
	    if go test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 30s $$pkg >$$log 2>&1; then \
	      summary="$$summary\n  $$target ($$pkg): found nothing"; \
	    else \
	      status=1; cat $$log; \
	      summary="$$summary\n  $$target ($$pkg): FOUND $$(grep -o 'testdata/fuzz/[^ ]*' $$log | head -1) (re-run it with go test -run=$$target/<name> $$pkg)"; \
	    fi; \
	  done; \
	done; rm -f $$log; \
	printf "make fuzz:$$summary\n"; exit $$status

## bench: run the benchmarks (see docs/benchmarks.md)
bench:
	TEST_DATABASE_URL="$${TEST_DATABASE_URL:-$(LOCAL_TEST_DATABASE_URL)}" go test -run '^$$' -bench . -benchmem ./...
