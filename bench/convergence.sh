#!/usr/bin/env bash
# bench/convergence.sh: BenchmarkConvergence, the time from an Apply through
# the Admin API (verified, written to embedded etcd) until every connected
# agent has ACKed the new version over its own discovery stream (loopback
# TCP, 100 streams per client connection, default 100 ms debounce).
# Target (DESIGN.md §7): 1,000 agents converge in under 1 s. Prints the
# figures recorded in docs/benchmarks.md (## Convergence).
#
#   BENCHTIME=10x COUNT=3 SHORT=1 bench/convergence.sh   # SHORT=1 skips 10,000 agents
#
# Metrics: converge-ms (mean Apply-to-last-ACK per op), max-ms (worst op),
# apply-ms (mean time for the Apply RPC alone), bytes/agent (heap +
# stack growth per connected agent, client and server side together).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCHTIME=${BENCHTIME:-10x}
COUNT=${COUNT:-3}
short=()
if [[ "${SHORT:-0}" == 1 ]]; then short=(-short); fi
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(go version | cut -d' ' -f3-) nproc=$(nproc) loadavg=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)"
go test ./controlplane/ -run '^$' -bench '^BenchmarkConvergence$' -benchtime "$BENCHTIME" -count "$COUNT" "${short[@]}" 2>&1 | grep -v '^{"level"'
