# Eddy — see README.md. Every target works on a fresh machine once
# .ci/run's packages are installed (clang etc. only for `make udfs`).
GO      ?= go
BIN     := bin/eddy
PKGS    := ./...
export GOFLAGS ?= -trimpath

.PHONY: all build demo test test-race check udfs bench bench-nexmark soak clean

all: build

## build: the eddy binary and eddy-kafka, the Kafka-protocol broker for
## local runs of the Kafka examples.
build:
	$(GO) build -o $(BIN) ./cmd/eddy
	$(GO) build -o bin/eddy-kafka ./cmd/eddy-kafka

## demo: the main job on the embedded default, printing its result.
demo: build
	./$(BIN) run examples/demo.yaml

## test: the whole suite (unit, end-to-end, multi-process cluster, hostile
## modules), then the runtime's own suites and the Nexmark references again
## built with -tags invariants (recycled batches are overwritten at once:
## a batch reused while something still reads it shows up as wrong
## output). The s3:// tests run against versitygw, which
## scripts/versitygw.sh builds once into a cache outside the repository
## (about 3 minutes cold; EDDY_SKIP_S3=1 skips them).
INVARIANTS_PKGS := ./dataflow/ ./dataflow/stream/ ./examples/nexmark/ ./connectors/
test:
	@if [ "$${EDDY_SKIP_S3:-}" != 1 ] && [ -z "$${EDDY_VERSITYGW:-}" ]; then echo "versitygw (S3 server for the tests): scripts/versitygw.sh"; fi
	EDDY_VERSITYGW="$${EDDY_VERSITYGW:-$$( [ "$${EDDY_SKIP_S3:-}" = 1 ] || scripts/versitygw.sh)}" \
		$(GO) test -count=1 -timeout 15m $(PKGS)
	$(GO) test -count=1 -timeout 10m -tags invariants $(INVARIANTS_PKGS)
	$(GO) test -count=1 -timeout 10m -tags invariants -run 'TestEndToEnd' ./dataflow/window/

## test-race: the race detector on the packages where it finishes in
## reasonable time (measured on a 2-core machine, -race against without):
## the coordinator and the worker (scheduler/...), state, storage,
## connectors, the runtime (dataflow without its window suite), abi,
## proto/rpc, the test kit and host (79 s; its grow bomb, which missed the
## 5 s call deadline under -race while wazero copied memory on each grow,
## takes 0.2 s since guest memory is a mapping). Left out: cmd/eddy (its
## tests run real eddy processes, which would have to be built with -race
## too), host/internal/interrupt (273 s under -race on a loaded 2-core
## machine), the window suite (463 s against 56 s)
## and udfs (106 s against 11 s); see the README. -short: the tests that
## write hundreds of thousands of keys (state) use fewer under the race
## detector.
RACE_PKGS := ./abi/... ./proto/... ./internal/... ./scheduler/... ./state/... ./storage/... ./connectors/... \
	./dataflow/ ./dataflow/jobspec/ ./dataflow/stream/ ./dataflow/checkpoint/ \
	./host/ ./host/internal/wasmbin/ ./host/internal/wasmcheck/ \
	./dataflow/localrun/
test-race:
	EDDY_VERSITYGW="$${EDDY_VERSITYGW:-$$( [ "$${EDDY_SKIP_S3:-}" = 1 ] || scripts/versitygw.sh)}" \
		$(GO) test -race -short -count=1 -timeout 20m $(RACE_PKGS)

## check: no build outputs tracked, formatting, vet, tidy go.mod, fixtures
## up to date.
check:
	scripts/check-tree.sh
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./sdk/go/... ./udfs/...
	$(GO) mod tidy
	@git diff --quiet -- go.mod go.sum || { echo "go mod tidy changed go.mod/go.sum"; git diff -- go.mod go.sum; exit 1; }
	$(MAKE) -B -C udfs
	$(MAKE) -B -C host/testdata
	@git diff --quiet -- udfs/build host/testdata || { echo "committed .wasm fixtures are stale: run make udfs and commit"; git status --short udfs/build host/testdata; exit 1; }
	$(MAKE) proto-check
	$(MAKE) dashboard-check

## bench-nexmark: the Nexmark queries of examples/nexmark, each on
## NEXMARK_EVENTS events, with the Wasm module and with native Go
## operators: events/s per core of CPU time next to Flink 2.0's.
NEXMARK_EVENTS ?= 2000000
bench-nexmark:
	$(GO) run ./cmd/eddy-bench -only nexmark -nexmark-events $(NEXMARK_EVENTS)

## soak: a keyed window job with a Wasm aggregate and checkpoints on a
## cluster of one coordinator and two workers, at 80% of the rate it
## reaches unpaced, for SOAK_FOR (10m); prints each process's RSS, the p99
## end-to-end latency and the checkpoint duration of the first and the
## last minute (cmd/eddy BenchmarkSoak).
SOAK_FOR ?= 10m
soak:
	EDDY_SOAK_FOR=$(SOAK_FOR) $(GO) test -run '^$$' -bench '^BenchmarkSoak$$' -benchtime 1x -timeout 60m ./cmd/eddy/

## udfs: rebuild the example operators (committed as test fixtures).
udfs:
	$(MAKE) -C udfs

## bench: Go benchmarks and the pipeline harness (throughput, the
## end-to-end latency at 1,000 records/s per buffer_timeout, the
## noisy-neighbour ratio of fair sharing between tenants, and the pause of
## a hot swap with small and 1 GB state against stop-with-savepoint and
## resubmit); prints figures.
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 2s ./abi/ ./host/... ./connectors/ ./state/ ./dataflow/window/
	$(GO) test -run '^$$' -bench 'ClusterThroughput|LeaderFailover|CheckpointOverhead|CheckpointLargeState|Recovery' -benchtime 2x ./cmd/eddy/
	$(GO) test -run '^$$' -bench 'KafkaPipeline' -benchtime 1x ./cmd/eddy/
	$(GO) run ./cmd/eddy-bench

## proto: regenerate the gRPC code under proto/ with the pinned tools
## (protoc from Debian's protobuf-compiler; plugins go-installed into bin/tools).
## proto-check: regenerate into a temporary directory and fail on any
## difference (skips with a message when the pinned protoc is missing).
PROTOC_VERSION             := 3.21.12
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
PROTOC_GEN_GRPC_GATEWAY_VERSION := v2.33.0
PROTO_ENV = GO="$(GO)" TOOLS="$(CURDIR)/bin/tools" PROTOC_VERSION=$(PROTOC_VERSION) \
	PROTOC_GEN_GO_VERSION=$(PROTOC_GEN_GO_VERSION) PROTOC_GEN_GO_GRPC_VERSION=$(PROTOC_GEN_GO_GRPC_VERSION) \
	PROTOC_GEN_GRPC_GATEWAY_VERSION=$(PROTOC_GEN_GRPC_GATEWAY_VERSION)

.PHONY: proto proto-check
proto:
	$(PROTO_ENV) scripts/protogen.sh

proto-check:
	$(PROTO_ENV) scripts/protogen.sh --check

clean:
	rm -rf bin

## dashboard: the web dashboard's assets (dashboard/dist, committed and
## embedded by package dashboard): npm ci from the lock file, then the
## build (tsc type check, esbuild bundle). dashboard-check: build into a
## temporary directory and fail when the committed dist differs; without
## npm it says so and fails.
.PHONY: dashboard dashboard-check
dashboard:
	scripts/dashboard.sh

dashboard-check:
	scripts/dashboard.sh --check
