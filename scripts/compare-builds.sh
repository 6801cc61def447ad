#!/usr/bin/env bash
# The gateway built with another allocator or hasher, side by side with the default
# build: each variant's CPU per request (and req/s) at no cache, TTL 0 and TTL 10,
# measured in the same rounds by scripts/cpu-per-request.sh.
#   default      what `cargo build --release` gives (mimalloc, ahash tables)
#   glibc        --no-default-features: glibc's malloc instead of mimalloc
#   std-hasher   --features std-hasher: std's SipHash for the request path's tables
#   scripts/compare-builds.sh [ROUNDS] [SECONDS]     (defaults 3 and 10)
# The variants' binaries are kept in target/variants/; the default build is rebuilt
# last, so target/release is left as `cargo build --release` makes it.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target/variants
gateways=""
for variant in default glibc std-hasher; do
  case $variant in
    default) features=() ;;
    glibc) features=(--no-default-features) ;;
    *) features=(--features "$variant") ;;
  esac
  cargo build --release --locked -p gateway "${features[@]}"
  cp target/release/gateway "target/variants/gateway-$variant"
  gateways="$gateways $variant=$PWD/target/variants/gateway-$variant"
done
cargo build --release --locked -p gateway -p user-service -p post-service -p loadgen
RUN_NAME=compare-builds GATEWAYS="${gateways# }" exec scripts/cpu-per-request.sh "$@"
