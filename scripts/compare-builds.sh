#!/usr/bin/env bash
# The gateway's allocator and hasher side by side: experiments/builds.toml in the matrix
# (each variant built once from HEAD, with intervals against the default build). Every
# flag goes to `loadgen matrix`, e.g. `scripts/compare-builds.sh --rounds 8`.
exec "$(dirname "$0")/run-matrix.sh" --config experiments/builds.toml "$@"
