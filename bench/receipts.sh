#!/usr/bin/env bash
# bench/receipts.sh: the receipt pipeline.
#   BenchmarkReceiptIngest (controlplane/ingest): the control plane's whole
#     per-batch path for batches of the agent's default size
#     (spool.DefaultBatchSize, 512), one core (-cpu 1): verify the signed
#     manifest against the TrustPolicy, check each receipt against its signed
#     digest, validate its whole encoding and decode the summary fields,
#     check the hash chain, store durably (fsync) and fold into passive
#     evidence.
#   BenchmarkIngestStages: the same batch split by stage.
#   BenchmarkSpoolAppend (agent/spool): durable agent-side appends from 16
#     concurrent callers, one core, with the sealer signing manifests (of
#     up to DefaultBatchSize receipts) and a stand-in shipper acknowledging
#     them.
# Target (DESIGN.md §7): at least 50,000 receipts/s ingested per control-plane
# core. Prints the figures recorded in docs/benchmarks.md (## Receipts).
#
#   BENCHTIME=200x SPOOLTIME=20000x COUNT=3 bench/receipts.sh
#
# Metrics: receipts/s (wall time; includes fsync waits and, on a shared
# machine, run-queue waits), receipts/cpu-s (receipts per second of process
# CPU time from getrusage: throughput per fully used core), MB/s (manifest
# bundle plus encoded receipts).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCHTIME=${BENCHTIME:-200x}
SPOOLTIME=${SPOOLTIME:-20000x}
COUNT=${COUNT:-3}
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(go version | cut -d' ' -f3-) nproc=$(nproc) loadavg=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo n/a)"
go test ./controlplane/ingest/ -run '^$' -bench '^BenchmarkReceiptIngest$' -benchtime "$BENCHTIME" -count "$COUNT" -cpu 1 | grep '^Benchmark'
go test ./controlplane/ingest/ -run '^$' -bench '^BenchmarkIngestStages$' -benchtime "$BENCHTIME" -count 1 -cpu 1 | grep '^Benchmark'
go test ./agent/spool/ -run '^$' -bench '^BenchmarkSpoolAppend$' -benchtime "$SPOOLTIME" -count "$COUNT" -cpu 1 | grep '^Benchmark'
