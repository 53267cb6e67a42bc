# aapd — the two commands that matter: `make run` and `make test`.

# The local development database (created on first run) and the server the
# tests create their own throwaway databases on.
DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/aapd?sslmode=disable
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
ADDR ?= :8080

.PHONY: run test build lint bench

## run: start the server on $(ADDR) with the echo agent, creating and migrating the database, printing a dev API key
run:
	DATABASE_URL='$(DATABASE_URL)' go run ./cmd/aapd serve --addr '$(ADDR)' --create-database --dev

## test: vet and run every test with the race detector against real Postgres
test:
	go vet ./...
	TEST_DATABASE_URL='$(TEST_DATABASE_URL)' go test -race -count=1 ./...

## build: build bin/aapd
build:
	go build -o bin/aapd ./cmd/aapd

## lint: gofmt and go vet
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "not gofmt'ed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...

## bench: run the benchmarks (see docs/benchmarks.md)
bench:
	TEST_DATABASE_URL='$(TEST_DATABASE_URL)' go test -run '^$$' -bench . -benchmem ./...
