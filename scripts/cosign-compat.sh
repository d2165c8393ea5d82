#!/usr/bin/env bash
# Checks interoperability with stock cosign v3, offline:
#   1. bundles made by `mcpready sign` (ECDSA P-256 and Ed25519 keys) pass
#      `cosign verify-blob-attestation --insecure-ignore-tlog`, and a
#      tampered payload fails it;
#   2. a key pair made by `cosign generate-key-pair` signs with
#      `mcpready sign` and verifies with `mcpready verify` and with cosign.
# cosign is installed once with `go install` into ./.cache/bin (only the Go
# module proxy is needed); later runs reuse it.
set -euo pipefail
cd "$(dirname "$0")/.."

COSIGN_VERSION="${COSIGN_VERSION:-v3.1.3}"
bin="$PWD/.cache/bin"
cosign="$bin/cosign"
stamp="$bin/cosign.version"
if [ ! -x "$cosign" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$COSIGN_VERSION" ]; then
  echo "== installing cosign $COSIGN_VERSION into $bin"
  mkdir -p "$bin"
  GOBIN="$bin" GOFLAGS=-mod=mod go install "github.com/sigstore/cosign/v3/cmd/cosign@$COSIGN_VERSION"
  echo "$COSIGN_VERSION" > "$stamp"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
go build -o "$work/mcpready" ./cmd/mcpready
mcpready="$work/mcpready"
export MCPREADY_PASSWORD=compat COSIGN_PASSWORD=compat
predicate_type=https://mcpready.dev/declaration/v1

cosign_verify() { # KEY.pub BUNDLE PAYLOAD
  "$cosign" verify-blob-attestation --key "$1" --bundle "$2" --type "$predicate_type" --insecure-ignore-tlog "$3"
}

for alg in ecdsa-p256 ed25519; do
  echo "== mcpready sign ($alg) -> cosign verify-blob-attestation"
  "$mcpready" keygen --out "$work/$alg" --algorithm "$alg" >/dev/null
  "$mcpready" sign --key "$work/$alg.key" --kind Declaration -f sign/testdata/declaration.yaml --bundle "$work/$alg.bundle.json" --payload "$work/$alg.payload.json" >/dev/null
  cosign_verify "$work/$alg.pub" "$work/$alg.bundle.json" "$work/$alg.payload.json"
  cp "$work/$alg.payload.json" "$work/$alg.tampered.json"
  printf ' ' >> "$work/$alg.tampered.json"
  if cosign_verify "$work/$alg.pub" "$work/$alg.bundle.json" "$work/$alg.tampered.json" 2>/dev/null; then
    echo "cosign accepted a tampered payload" >&2
    exit 1
  fi
done

echo "== cosign generate-key-pair -> mcpready sign -> mcpready verify and cosign"
(cd "$work" && "$cosign" generate-key-pair --output-key-prefix cosign >/dev/null)
"$mcpready" sign --key "$work/cosign.key" --kind Declaration -f sign/testdata/declaration.yaml --bundle "$work/cosign.bundle.json" --payload "$work/cosign.payload.json" >/dev/null
"$mcpready" verify -f "$work/cosign.bundle.json" --key "$work/cosign.pub"
cosign_verify "$work/cosign.pub" "$work/cosign.bundle.json" "$work/cosign.payload.json"

echo "cosign $COSIGN_VERSION compatibility: OK"
