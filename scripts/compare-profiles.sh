#!/usr/bin/env bash
# The gateway's release profiles side by side: experiments/profiles.toml in the matrix
# (each profile built once from HEAD, with intervals against release-no-lto). Every
# flag goes to `loadgen matrix`, e.g. `scripts/compare-profiles.sh --only release-no-lto-ttl-0,release-ttl-0`.
exec "$(dirname "$0")/run-matrix.sh" --config experiments/profiles.toml "$@"
