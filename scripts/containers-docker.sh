#!/usr/bin/env bash
# docker as wrangler's image builds need it on an engine without buildx (WRANGLER_DOCKER_BIN):
# wrangler builds with `docker build --load … --provenance=false`, two flags of buildx that Debian's
# docker.io (the legacy builder) refuses; the legacy builder loads the image into the engine anyway
# and makes no provenance. Every other call passes through unchanged.
set -euo pipefail
args=()
for a in "$@"; do
  case "$a" in
    --load | --provenance=false) ;;
    *) args+=("$a") ;;
  esac
done
exec docker "${args[@]}"
