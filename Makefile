# pgsync: see README.md. `make test` and `make demo` install PostgreSQL 15
# when it is missing (Debian: apt-get), so they work on a fresh machine.
GO      ?= go
# The version names the commit; "-dirty" when code differs from it, not
# when only benchmark results and the pages made of them do (make bench
# rewrites them between its builds).
VERSION ?= $(shell v=$$(git describe --tags --always 2>/dev/null || echo dev); \
  [ -z "$$(git status --porcelain -- . ':!bench-results' ':!docs/benchmarks.md' ':!docs/benchmarks-details.md' ':!docs/img/benchmarks' 2>/dev/null)" ] || v=$$v-dirty; echo $$v)
LDFLAGS := -X github.com/pgsync/pgsync/cmd.Version=$(VERSION)
# The integration tests' own clusters, apart from the ones of `make demo`.
TEST_PG_DIR ?= /tmp/pgsync-test-pg

.PHONY: all build pg-install test test-versions unit bench-test integration demo bench bench-all bench-large bench-hotpath clean

all: build

build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/pgsync ./cmd/pgsync

pg-install:
	bash scripts/install-pg.sh

# Unit and integration tests (the integration build tag). The integration tests start and stop their own
# clusters; the destroy below also cleans up after a test binary that was
# killed (for example by -timeout).
test: pg-install build bench-test
	$(GO) vet -tags integration ./...
	@rc=0; PGSYNC_TEST_PG_DIR=$(TEST_PG_DIR) $(GO) test -tags integration -count=1 -timeout 45m ./... || rc=$$?; \
	  PGSYNC_PG_DIR=$(TEST_PG_DIR) PGSYNC_SOURCE_PORT=26432 PGSYNC_TARGET_PORT=26433 bash scripts/local-pg.sh destroy >/dev/null 2>&1; \
	  exit $$rc

# The upgrade matrix (issue 32, test/versions, build tag versions): the
# ERP fixture moved under writes between clusters of two majors, each
# pair SOURCE:TARGET in VERSION_PAIRS. Servers other than Debian's 15 come
# from npm (scripts/pg-versions.sh, cached in /var/cache/pgsync/pg as
# root); ports 26612-26620 (PGSYNC_TEST_VERSION_PORT, the first; the last
# three are a PostgreSQL 17 primary, its standby and a target, for
# TestFailover17 and TestStandbySource (16 and 17), which run whatever
# the pairs).
# Each pair's timings are appended to bench-results/versions.jsonl, the
# failover's to bench-results/failover.jsonl.
VERSION_PAIRS ?= 13:15,13:16,13:18,14:17,15:18,16:17,17:18
test-versions: pg-install
	$(GO) vet -tags versions ./test/versions
	PGSYNC_TEST_VERSION_PAIRS=$(VERSION_PAIRS) $(GO) test -tags versions -count=1 -timeout 60m -v ./test/versions

# Every package's tests but the integration tests (test/integration, behind
# the integration build tag): no PostgreSQL needed.
unit: bench-test
	$(GO) test -count=1 ./...

# scripts/bench writes docs/benchmarks.md; it is a module of its own (so
# that pgsync does not depend on gonum/plot), which ./... does not reach.
bench-test:
	cd scripts/bench && $(GO) vet ./... && $(GO) test -count=1 ./...

demo: pg-install build
	bash scripts/demo.sh

# The first benchmarks page's set, at the commit checked out, then both
# pages (docs/benchmarks.md): the whole move under load (pgsync, native,
# pgcopydb --follow; 3 runs each), the copy, the catch-up and one large
# transaction. 16 minutes on 2 cores at d99166e. The bench clusters are stopped
# at the end, pass or fail. Results go to bench-results/, the run's logs
# (out of git) to BENCH_LOGS, one folder a scenario. make bench-all runs
# every benchmark (harness all).
BENCH_PG := PGSYNC_PG_DIR=/tmp/pgsync-bench-pg PGSYNC_SOURCE_PORT=26562 PGSYNC_TARGET_PORT=26563
ifndef BENCH_LOGS
BENCH_LOGS := $(or $(TMPDIR),/tmp)/pgsync-bench-logs/bench-$(shell date -u +%Y%m%dT%H%M%SZ)
endif
HARNESS = $(GO) run ./harness -root ../..
bench: pg-install build
	@rc=0; \
	  (cd scripts/bench && $(HARNESS) -logs $(BENCH_LOGS)/move move && \
	    $(HARNESS) -logs $(BENCH_LOGS)/copy copy && \
	    $(HARNESS) -logs $(BENCH_LOGS)/catchup catchup && \
	    $(HARNESS) -logs $(BENCH_LOGS)/bigtxn bigtxn -rows 2000000) || rc=$$?; \
	  $(BENCH_PG) bash scripts/local-pg.sh stop; \
	  echo "make bench: the run's logs are in $(BENCH_LOGS)"; \
	  [ $$rc -eq 0 ] || exit $$rc; \
	  cd scripts/bench && $(GO) run ./page -root ../..

# Every benchmark behind both benchmarks pages, one after the other, then
# the pages: hours, and room for the 10 GB copy's tables twice (11.9 GB
# of heap on each cluster, heap_bytes in bench-results/copy-10gb/copy.json)
# and their WAL. It refuses a
# checkout with changes (the figures name the commit).
bench-all: pg-install build
	cd scripts/bench && $(HARNESS) -logs $(BENCH_LOGS) all

# The whole move at about 10 GB (pgbench scale 600 and the documents,
# under the same load as make bench), three runs of pgsync and of native,
# interleaved; the page puts the medians beside the 1 GB move.
bench-large: pg-install build
	@rc=0; \
	  (cd scripts/bench && $(HARNESS) -logs $(BENCH_LOGS)/move-10gb move -scale 600 -runs 3 -contenders pgsync,native \
	    -timeout 12m -out ../../bench-results/move-10gb) || rc=$$?; \
	  $(BENCH_PG) bash scripts/local-pg.sh stop; \
	  echo "make bench-large: the run's logs are in $(BENCH_LOGS)"; \
	  [ $$rc -eq 0 ] || exit $$rc; \
	  cd scripts/bench && $(GO) run ./page -root ../..

# Hot-path benchmarks (no network): decode and statement building. The
# recorded comparison with an earlier commit is harness hotpath
# (cd scripts/bench && go run ./harness -root ../.. hotpath -base COMMIT).
bench-hotpath:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./pgoutput ./apply

clean:
	rm -rf bin
