#!/usr/bin/env bash
# Installs Debian's PostgreSQL server for the tests when it is missing
# (apt-get, as root). The tests start their own throwaway clusters with
# initdb in a temporary directory on a free loopback port (internal/pgtest)
# and skip, saying why, only when it cannot be installed.
#
#   scripts/postgres.sh            # install when missing; print the bin dir
set -euo pipefail

bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1; }

if [ -z "$(bin)" ] || [ ! -x "$(bin)/initdb" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "postgres.sh: PostgreSQL is not installed and installing it needs root (apt-get install postgresql)" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
fi
bin
