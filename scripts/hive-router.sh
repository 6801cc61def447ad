#!/usr/bin/env bash
# Hive Router run as the lab's gateway is, for scripts/cpu-per-request.sh's GATEWAYS
# (docs/deep.md): the peer's own launcher, peers/hive-router/router.sh, which says what
# each flag does and builds Hive Router 0.2.0 on first use.
#   GATEWAYS="hive=scripts/hive-router.sh hive-dedupe=scripts/hive-router.sh,--dedupe \
#     lab=target/release/gateway,--worker-threads,1" CONFIGS=no-cache \
#     scripts/cpu-per-request.sh --deep 3 8
exec "$(dirname "$0")/../peers/hive-router/router.sh" "$@"
