#!/usr/bin/env bash
# A local Docker engine for the docker launcher's tests (runner-cli/test/docker-engine.test.mjs) and
# for trying the launcher by hand: Debian's docker.io installed when dockerd is missing, dockerd
# started when it does not answer, and an agent image built offline from this machine's own node and
# git when it is absent. Each step is skipped when already done, so running it again is cheap.
#
#   scripts/docker-engine.sh [--no-install]
#
# --no-install  never installs a package (the tests use it: they do not reach the network); the
#               engine is started and the image built only when dockerd is already installed.
# DOCKET_DOCKER_IMAGE  the image's tag (default docket-agent:local)
# DOCKERD_LOG          where a dockerd started here writes its log (default /tmp/dockerd.log)
# DOCKERD_START_WAIT_S how long to wait for a started dockerd to answer (default 30)
#
# No registry is needed: nothing is pulled. The image is a root filesystem holding node, git (with
# git-core's helpers), sh and the shared libraries `ldd` lists for them, made by `docker import`.
# Exits 0 with the engine answering and the image present, or non-zero with the reason on stderr.
set -euo pipefail

IMAGE="${DOCKET_DOCKER_IMAGE:-docket-agent:local}"
LOG="${DOCKERD_LOG:-/tmp/dockerd.log}"
WAIT_S="${DOCKERD_START_WAIT_S:-30}"
INSTALL=1
[ "${1:-}" = "--no-install" ] && INSTALL=0

say() { echo "docker-engine: $*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi; }

install_engine() {
  command -v dockerd >/dev/null 2>&1 && return 0
  if [ "$INSTALL" = 0 ]; then say "dockerd is not installed (scripts/docker-engine.sh without --no-install installs Debian's docker.io)"; return 1; fi
  say "installing Debian's docker.io"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
}

start_engine() {
  if docker info >/dev/null 2>&1; then say "the engine answers"; return 0; fi
  say "starting dockerd (log: $LOG)"
  # Detached, so it outlives this script; it is the machine's engine from now on. In a session of
  # its own: a Ctrl-C to whatever started it (npm start, a test run) would otherwise stop dockerd
  # too, before that process removes the containers it left on it.
  as_root setsid sh -c "nohup dockerd >'$LOG' 2>&1 </dev/null &"
  for _ in $(seq 1 $((WAIT_S * 5))); do
    if docker info >/dev/null 2>&1; then say "the engine answers"; return 0; fi
    sleep 0.2
  done
  say "dockerd did not answer within ${WAIT_S} s; the end of $LOG:"
  tail -n 5 "$LOG" >&2 || true
  return 1
}

# Copy a file into the root filesystem at the same path, with the libraries it links.
copy_with_libs() {
  local root="$1" file="$2"
  mkdir -p "$root$(dirname "$file")"
  cp -L "$file" "$root$file"
  copy_libs "$root" "$file"
}

copy_libs() {
  local root="$1" file="$2" lib
  # A script, or a static program, lists no libraries.
  for lib in $(ldd "$file" 2>/dev/null | grep -o '/[^ ]*' || true); do
    if [ ! -e "$root$lib" ]; then
      mkdir -p "$root$(dirname "$lib")"
      cp -L "$lib" "$root$lib"
    fi
  done
}

build_image() {
  if docker image inspect "$IMAGE" >/dev/null 2>&1; then say "image $IMAGE is present"; return 0; fi
  say "building $IMAGE from this machine's node and git"
  local root
  root="$(mktemp -d)"
  trap 'rm -rf "$root"' RETURN
  local node git sh exec_path
  node="$(readlink -f "$(command -v node)")"
  git="$(readlink -f "$(command -v git)")"
  sh="$(readlink -f "$(command -v sh)")"
  exec_path="$(git --exec-path)"
  copy_with_libs "$root" "$node"
  copy_with_libs "$root" "$git"
  copy_with_libs "$root" "$sh"
  # git's helpers (git-core): most are hard links to one program, which `cp -a` keeps as links.
  mkdir -p "$root$(dirname "$exec_path")"
  cp -a "$exec_path" "$root$exec_path"
  for f in "$exec_path"/*; do
    [ -f "$f" ] && ! [ "$f" -ef "$git" ] && copy_libs "$root" "$f"
  done
  mkdir -p "$root/bin" "$root/usr/bin" "$root/tmp" "$root/etc" "$root/workspace"
  chmod 1777 "$root/tmp"
  [ -e "$root/usr/bin/node" ] || ln -s "$node" "$root/usr/bin/node"
  [ -e "$root/usr/bin/git" ] || ln -s "$git" "$root/usr/bin/git"
  [ -e "$root/bin/sh" ] || ln -s "$sh" "$root/bin/sh"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  tar -C "$root" -c . | docker import \
    --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' --change 'ENV HOME=/tmp' --change 'WORKDIR /workspace' \
    - "$IMAGE" >/dev/null
  say "built $IMAGE ($(docker image inspect --format '{{.Size}}' "$IMAGE") bytes)"
}

install_engine
start_engine
build_image
