#!/usr/bin/env bash
# Makes sure headless Chromium (Debian's chromium package) is installed for
# the console's browser tests, and prints its path. It installs with apt-get
# when the binary is missing and this runs as root (CI does); otherwise it
# says why it cannot and exits 1, and the browser tests skip with that
# message.
#
#   scripts/chromium.sh        # prints e.g. /usr/bin/chromium
set -euo pipefail

for b in "${CHROMIUM:-}" /usr/bin/chromium /usr/bin/chromium-browser; do
  if [ -n "$b" ] && [ -x "$b" ]; then
    echo "$b"
    exit 0
  fi
done
if [ "$(id -u)" != 0 ]; then
  echo "chromium.sh: /usr/bin/chromium is missing and installing it needs root (apt-get install chromium)" >&2
  exit 1
fi
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core; } >&2; then
  echo "chromium.sh: apt-get could not install chromium" >&2
  exit 1
fi
echo /usr/bin/chromium
