#!/usr/bin/env bash
# bench/proxy.sh: BenchmarkProxyOverhead, tools/call on a loopback go-sdk
# upstream directly vs through the full host agent (verified configuration,
# decision, execution, result validation, receipt into the fsync'd spool),
# side by side in one run. Target (DESIGN.md §7): p50 within 1.5x of
# direct, saturation throughput at least 0.6x of direct. Prints the figures
# recorded in docs/benchmarks.md (## Proxy overhead).
#
#   BENCHTIME=3000x COUNT=3 bench/proxy.sh
#
# Metrics: p50-ratio, p99-ratio, throughput-ratio (agent / direct), and the
# raw direct-/agent- p50 and p99 (µs, from sequential calls on one warm
# session each, in a random order per iteration) and calls/s (8 sessions x
# 2 calls in flight, alternating 250 ms windows direct/agent, 6 rounds
# each). tracing=off also reports floor-p50-ratio and floor-p99-ratio: a
# proxy that only copies bytes, called in the same loop, the floor no real
# proxy can beat on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCHTIME=${BENCHTIME:-3000x}
COUNT=${COUNT:-3}
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(go version | cut -d' ' -f3-) nproc=$(nproc) loadavg=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)"
go test ./agent/ -run '^$' -bench '^BenchmarkProxyOverhead$' -benchtime "$BENCHTIME" -count "$COUNT" 2>&1 | grep -E '^(Benchmark|ok|FAIL|PASS)'
