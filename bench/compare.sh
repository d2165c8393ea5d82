#!/usr/bin/env bash
# bench/compare.sh: the four headline benchmarks of a base commit and of the
# working tree, side by side in one run. Test binaries of both are built
# first, then each benchmark runs base, head, base, head, ... (ROUNDS times)
# so that both see the same machine load. Prints every result line prefixed
# with "base" or "head", then a summary: per benchmark and metric, the
# median of each side and in how many rounds head was lower than base.
# Single runs of the latency ratios move by about 0.05 on a 2-core machine;
# read changes from the medians and the round counts, not from one round.
# docs/benchmarks.md records the figures.
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

# summarize prints, for each benchmark and metric in the result lines of
# file, the median of base's and head's rounds and how many rounds head was
# lower than base (the round's base and head results paired in order).
summarize() {
  echo "# summary: benchmark metric base-median head-median head-lower/rounds"
  awk '
    function median(a, n,    i, j, t) {
      for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
      return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
    }
    {
      side = $1; name = $2; r = ++round[side, name]
      if (!(name in seen)) { seen[name] = 1; names[++nn] = name }
      for (i = 4; i < NF; i += 2) {
        unit = $(i+1); v[side, name, unit, r] = $i
        if (!((name, unit) in hasunit)) { hasunit[name, unit] = 1; units[name, ++nu[name]] = unit }
      }
    }
    END {
      for (k = 1; k <= nn; k++) {
        name = names[k]; n = round["head", name]; if (round["base", name] < n) n = round["base", name]
        for (u = 1; u <= nu[name]; u++) {
          unit = units[name, u]; lower = 0
          for (r = 1; r <= n; r++) {
            b[r] = v["base", name, unit, r] + 0; h[r] = v["head", name, unit, r] + 0
            if (h[r] < b[r]) lower++
          }
          if (n > 0) printf "%s %s %.4g %.4g %d/%d\n", name, unit, median(b, n), median(h, n), lower, n
        }
      }
    }' "$1"
}

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
        grep -E '^Benchmark' | sed "s/^/$side /" | tee -a "$work/results"
    done
  done
done
[[ -s "$work/results" ]] && summarize "$work/results"
