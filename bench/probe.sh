#!/usr/bin/env bash
# bench/probe.sh: active probing. BenchmarkFunnel is one full funnel
# (reachability, both protocol eras, every listing page, a read-only canary
# call, the result check, 3 warm listings) against a loopback go-sdk
# endpoint; BenchmarkProbe1000 probes 1,000 loopback endpoints end to end
# with 64 funnels in flight. Target (DESIGN.md §7): 1,000 endpoints in
# under 60 s. Prints the figures recorded in docs/benchmarks.md (## Probing).
#
#   COUNT=3 bench/probe.sh
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${COUNT:-3}
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(go version | cut -d' ' -f3-) nproc=$(nproc) loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
go test ./probe/ -run '^$' -bench '^BenchmarkFunnel$' -benchtime 200x -count "$COUNT" | grep '^Benchmark'
go test ./probe/ -run '^$' -bench '^BenchmarkProbe1000$' -benchtime 1x -count "$COUNT" | grep '^Benchmark'
