#!/usr/bin/env bash
# bench/decide.sh: BenchmarkDecide, the host agent's decision (policy +
# routing) over one equivalence class of 50 members plus 200 noise entries.
# Target (DESIGN.md §7): p99 under 20µs, no lock contention. Prints the
# figures recorded in docs/benchmarks.md (## Decision).
#
#   BENCHTIME=200000x COUNT=3 bench/decide.sh
#
# Metrics: ns/op (wall, includes the per-op timing calls), cpu-ns/op
# (process CPU per op), p50-ns and p99-ns (from per-op samples), B/op,
# allocs/op. "serial" is one goroutine; "parallel" is b.RunParallel with
# GOMAXPROCS goroutines sharing one snapshot and one breaker set.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCHTIME=${BENCHTIME:-200000x}
COUNT=${COUNT:-3}
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(go version | cut -d' ' -f3-) nproc=$(nproc) loadavg=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)"
go test ./agent/decide/ -run '^$' -bench '^BenchmarkDecide$' -benchtime "$BENCHTIME" -count "$COUNT" -benchmem
