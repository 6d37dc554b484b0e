#!/usr/bin/env bash
# Managed runners' containers on a local Docker engine, for `npm start`, the tests and
# `wrangler deploy --dry-run` (which builds the image): scripts/docker-engine.sh's engine and base
# image (this machine's node and git, made offline), then two images built on that base:
#
# - the egress stand-in (containers/egress): workerd starts one next to each container in place of
#   `cloudflare/proxy-everything`, which cannot be pulled here (MINIFLARE_CONTAINER_EGRESS_IMAGE);
# - the managed runner (containers/runner): the runner CLI's build, its production node_modules
#   (better-sqlite3 built for this machine's glibc) and the sample agent, staged into
#   containers/runner/app/ first, which wrangler's own build of the Dockerfile reads too.
#
# Each image is rebuilt only when what it is built from changed (a hash kept as an image label).
#
#   scripts/containers-engine.sh [--no-install]   prepare; prints the environment to use, KEY=VALUE
#   scripts/containers-engine.sh --clean [PREFIX] remove the containers workerd left (each
#                                                 container and its egress sidecar) whose names
#                                                 start with PREFIX (default workerd-: all of them)
#
# DOCKET_EGRESS_IMAGE  the stand-in's tag (default docket-egress:local)
# DOCKET_RUNNER_IMAGE  the managed runner's tag (default docket-managed-runner:local)
# Exits 0 with the images present, or non-zero with the reason on stderr.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BASE_IMAGE="${DOCKET_DOCKER_IMAGE:-docket-agent:local}"
EGRESS_IMAGE="${DOCKET_EGRESS_IMAGE:-docket-egress:local}"
RUNNER_IMAGE="${DOCKET_RUNNER_IMAGE:-docket-managed-runner:local}"
RUNNER_DIR="$ROOT/containers/runner"

say() { echo "containers-engine: $*" >&2; }

clean() {
  # workerd names each container workerd-<worker and class>-<id> and its sidecar the same with -proxy.
  local prefix="${1:-workerd-}" ids
  ids="$(docker ps -aq --filter "name=^$prefix" 2>/dev/null || true)"
  if [ -n "$ids" ]; then
    # shellcheck disable=SC2086
    docker rm -f $ids >/dev/null
    say "removed $(echo "$ids" | wc -l) container(s) workerd left"
  fi
}

# A hash of the files an image is built from, and of the base image it is built on.
inputs_hash() {
  { docker image inspect --format '{{.Id}}' "$BASE_IMAGE"; cd "$ROOT" && find "$@" -type f -print0 | sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-16
}

# docker build of $2 (a directory with its Dockerfile) as $1, unless the image holds hash $3.
build_if_changed() {
  local image="$1" dir="$2" hash="$3"
  if [ "$(docker image inspect --format '{{index .Config.Labels "docket.inputs"}}' "$image" 2>/dev/null || true)" = "$hash" ]; then
    say "image $image is current"
    return 0
  fi
  say "building $image"
  docker build -q --build-arg "BASE=$BASE_IMAGE" --label "docket.inputs=$hash" -t "$image" "$dir" >/dev/null
}

# The runner CLI as installed: bin, dist, package.json and the production dependencies npm lists.
stage_runner() {
  [ -f "$ROOT/runner-cli/dist/runner-cli/src/cli.js" ] || { say "the runner CLI is not built (npm run build -w runner-cli)"; return 1; }
  local app="$RUNNER_DIR/app" dep
  rm -rf "$app"
  mkdir -p "$app/node_modules"
  cp -r "$ROOT/runner-cli/bin" "$ROOT/runner-cli/dist" "$ROOT/runner-cli/package.json" "$app/"
  cp "$ROOT/scripts/demo-agent.mjs" "$app/"
  for dep in $(cd "$ROOT" && npm ls --omit=dev --all --parseable -w runner-cli 2>/dev/null); do
    case "$dep" in
      "$ROOT/node_modules/docket-runner" | "$ROOT" | "$ROOT/runner-cli") ;;
      "$ROOT"/*node_modules/*)
        # A package nested in one copied already came with it.
        [ -e "$app/${dep#"$ROOT"/}" ] && continue
        mkdir -p "$app/$(dirname "${dep#"$ROOT"/}")"
        cp -r "$dep" "$app/${dep#"$ROOT"/}"
        ;;
    esac
  done
}

if [ "${1:-}" = "--clean" ]; then clean "${2:-}"; exit 0; fi

"$ROOT/scripts/docker-engine.sh" "$@"
build_if_changed "$EGRESS_IMAGE" "$ROOT/containers/egress" "$(inputs_hash containers/egress)"
# What the runner's image is made from: the runner's build, the lockfile its node_modules come
# from, the sample agent and the image's own files (app/ is staged from these).
runner_hash="$(inputs_hash runner-cli/bin runner-cli/dist runner-cli/package.json package-lock.json scripts/demo-agent.mjs \
  containers/runner/Dockerfile containers/runner/start.sh scripts/containers-engine.sh)"
if [ "$(cat "$RUNNER_DIR/app/.inputs" 2>/dev/null || true)" != "$runner_hash" ]; then
  stage_runner
  echo "$runner_hash" >"$RUNNER_DIR/app/.inputs"
fi
build_if_changed "$RUNNER_IMAGE" "$RUNNER_DIR" "$runner_hash"
echo "WRANGLER_DOCKER_BIN=$ROOT/scripts/containers-docker.sh"
echo "MINIFLARE_CONTAINER_EGRESS_IMAGE=$EGRESS_IMAGE"
echo "DOCKET_RUNNER_IMAGE=$RUNNER_IMAGE"
