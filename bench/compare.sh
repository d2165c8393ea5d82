#!/usr/bin/env bash
# bench/compare.sh: the four headline benchmarks of a base commit and of the
# working tree, side by side in one run. Test binaries of both are built
# first, then each benchmark runs base, head, base, head, ... (ROUNDS times)
# so that both see the same machine load. Prints every result line prefixed
# with "base" or "head"; docs/benchmarks.md records the figures.
#
#   bench/compare.sh f3c2598            # ROUNDS=3 by default
#   ROUNDS=5 ONLY=Decide bench/compare.sh f3c2598
#
# Benchmarks (package, name, benchtime, extra flags):
#   agent/decide        BenchmarkDecide          200000x
#   agent               BenchmarkProxyOverhead   3000x
#   controlplane        BenchmarkConvergence     3x
#   controlplane/ingest BenchmarkReceiptIngest   100x    -cpu 1
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: bench/compare.sh BASE_COMMIT}
ROUNDS=${ROUNDS:-3}
ONLY=${ONLY:-}
work=$(mktemp -d)
trap 'git worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git worktree add -q --detach "$work/base" "$base"

benches=(
  "agent/decide Decide 200000x"
  "agent ProxyOverhead 3000x"
  "controlplane Convergence 3x"
  "controlplane/ingest ReceiptIngest 100x cpu=1"
)
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) base=$(git rev-parse --short "$base") head=$(git rev-parse --short HEAD)$(git diff --quiet || echo +dirty) $(go version | cut -d' ' -f3-) nproc=$(nproc) loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
for b in "${benches[@]}"; do
  read -r pkg name bt extra <<<"$b"
  [[ -n "$ONLY" && "$name" != "$ONLY" ]] && continue
  bin=$(echo "$pkg" | tr / _)
  (cd "$work/base" && go test -c -o "$work/base-$bin.test" "./$pkg")
  go test -c -o "$work/head-$bin.test" "./$pkg"
  for ((i = 1; i <= ROUNDS; i++)); do
    for side in base head; do
      dir=$([[ $side == base ]] && echo "$work/base/$pkg" || echo "$PWD/$pkg")
      (cd "$dir" && "$work/$side-$bin.test" -test.run '^$' -test.bench "^Benchmark${name}\$" \
        -test.benchtime "$bt" -test.benchmem ${extra:+"-test.$extra"} 2>&1) |
        grep -E '^Benchmark' | sed "s/^/$side /"
    done
  done
done
