#!/usr/bin/env bash
# docker as wrangler's local container runs need it on this machine (WRANGLER_DOCKER_BIN):
# - wrangler builds with `docker build --load … --provenance=false`, two flags of buildx that Debian's
#   docker.io (the legacy builder) refuses; the legacy builder loads the image into the engine
#   anyway and makes no provenance, so they are dropped;
# - `wrangler dev` pulls the egress sidecar's image (MINIFLARE_CONTAINER_EGRESS_IMAGE) before each
#   start; the local stand-in is built here, not in a registry, so a pull of an image the engine
#   already has is answered by the engine's copy.
# Every other call passes through unchanged.
set -euo pipefail
if [ "${1:-}" = "pull" ] && [ -n "${2:-}" ] && docker image inspect "$2" >/dev/null 2>&1; then
  exit 0
fi
args=()
for a in "$@"; do
  case "$a" in
    --load | --provenance=false) ;;
    *) args+=("$a") ;;
  esac
done
exec docker "${args[@]}"
