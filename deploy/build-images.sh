#!/usr/bin/env bash
# Build the stack's images on this host, with a docker CLI that can build them:
#
#   deploy/build-images.sh                     # dnnframe, rabbitmq and postgres (below)
#   deploy/build-images.sh dnnframe rabbitmq   # only those
#   deploy/build-images.sh --check             # only print the docker CLI it would use
#
# The project's Dockerfile needs BuildKit (its pip steps mount a build secret), so the
# legacy builder cannot build it. A docker CLI of 23.0 or later builds with BuildKit only
# through its buildx plugin; without it `docker build` stops with "BuildKit is enabled but
# the buildx component is missing or broken". An older CLI, such as Debian bookworm's
# docker.io (20.10), has BuildKit built in. So this uses the first `docker` on PATH that
# can build (DOCKER names the one to use instead), or says in one line what to install.
#
# Images (the names the compose files use; deploy/compose.local-images.yml runs them):
#   dnnframe  $DNNFRAME_IMAGE           (dnnframe:latest)            the Dockerfile
#   rabbitmq  $DNNFRAME_RABBITMQ_IMAGE  (dnnframe-rabbitmq:bookworm) deploy/rabbitmq
#   postgres  $DNNFRAME_POSTGRES_IMAGE  (dnnframe-postgres:bookworm) deploy/postgres
# All three are built on $PYTHON_IMAGE: by default the official python:3.11-slim-bookworm
# where it is here or can be pulled, else the stand-in deploy/build-base-image.sh builds
# from Debian packages (no registry needed). DNNFRAME_EXTRAS: the dnnframe image's extras
# (all,monitoring); DNNFRAME_BUILD_LABEL=key=value: a label on every image built.
# Builds use the host's network (apt, PyPI; dockerd may run without a bridge) and pass the
# host's CA bundle as a build secret (never stored in the image).
set -euo pipefail
cd "$(dirname "$0")/.."

OFFICIAL_BASE=python:3.11-slim-bookworm
STAND_IN_BASE=dnnframe-base:3.11-bookworm
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt

die() { echo "deploy/build-images.sh: $*" >&2; exit 1; }

# Whether this docker CLI builds with BuildKit: a buildx plugin it can run, or a client
# older than 23.0, whose `docker build` has BuildKit inside.
can_build() {
  local cli="$1" version
  "$cli" buildx version >/dev/null 2>&1 && return 0
  version="$("$cli" --version 2>/dev/null | sed -n 's/^Docker version \([0-9]*\)\..*/\1/p')"
  [ -n "$version" ] && [ "$version" -lt 23 ]
}

pick_docker() {
  local candidates=() cli dir dirs rejected=()
  if [ -n "${DOCKER:-}" ]; then
    candidates=("$DOCKER")
  else
    IFS=: read -ra dirs <<<"$PATH"
    for dir in "${dirs[@]}"; do
      [ -x "${dir:-.}/docker" ] && candidates+=("${dir:-.}/docker")
    done
  fi
  [ ${#candidates[@]} -gt 0 ] || die "no docker CLI on PATH: install Debian's docker.io (apt-get install docker.io) or Docker's docker-ce-cli with docker-buildx-plugin"
  for cli in "${candidates[@]}"; do
    if can_build "$cli"; then
      echo "$cli"
      return 0
    fi
    rejected+=("$cli ($("$cli" --version 2>/dev/null | sed -n 's/^Docker version \([^,]*\).*/\1/p'), no buildx)")
  done
  die "no docker CLI here builds with BuildKit, which the Dockerfile needs: ${rejected[*]}; install docker-buildx-plugin (Docker's apt repository) or Debian's docker.io, whose docker 20.10 has BuildKit built in"
}

check_only=false
images=()
for arg in "$@"; do
  case "$arg" in
    --check) check_only=true ;;
    dnnframe | rabbitmq | postgres) images+=("$arg") ;;
    *) die "unknown argument '$arg': name images (dnnframe, rabbitmq, postgres) or --check" ;;
  esac
done
[ ${#images[@]} -gt 0 ] || images=(dnnframe rabbitmq postgres)

DOCKER="$(pick_docker)"
if $check_only; then
  echo "$DOCKER"
  exit 0
fi
echo "docker CLI: $DOCKER ($("$DOCKER" --version))"
"$DOCKER" info >/dev/null 2>&1 || die "no Docker engine answers '$DOCKER info': start dockerd"

base="${PYTHON_IMAGE:-}"
if [ -z "$base" ]; then
  if "$DOCKER" image inspect "$OFFICIAL_BASE" >/dev/null 2>&1 \
      || timeout 120 "$DOCKER" pull "$OFFICIAL_BASE" >/dev/null 2>&1; then
    base="$OFFICIAL_BASE"
  else
    echo "$OFFICIAL_BASE cannot be pulled: building the stand-in $STAND_IN_BASE from Debian packages"
    DOCKER="$DOCKER" deploy/build-base-image.sh "$STAND_IN_BASE"
    base="$STAND_IN_BASE"
  fi
fi

build() {  # TAG CONTEXT BASE_ARG [ARG...]
  local tag="$1" context="$2" base_arg="$3"
  shift 3
  local args=(build --network host --build-arg "$base_arg=$base" -t "$tag" "$@")
  [ -z "${DNNFRAME_BUILD_LABEL:-}" ] || args+=(--label "$DNNFRAME_BUILD_LABEL")
  [ ! -s "$CA_BUNDLE" ] || args+=(--secret "id=ca-certificates,src=$CA_BUNDLE")
  echo "building $tag on $base"
  DOCKER_BUILDKIT=1 "$DOCKER" "${args[@]}" "$context"
}

for image in "${images[@]}"; do
  case "$image" in
    dnnframe) build "${DNNFRAME_IMAGE:-dnnframe:latest}" . PYTHON_IMAGE \
                --build-arg "DNNFRAME_EXTRAS=${DNNFRAME_EXTRAS:-all,monitoring}" ;;
    rabbitmq) build "${DNNFRAME_RABBITMQ_IMAGE:-dnnframe-rabbitmq:bookworm}" deploy/rabbitmq BASE_IMAGE ;;
    postgres) build "${DNNFRAME_POSTGRES_IMAGE:-dnnframe-postgres:bookworm}" deploy/postgres BASE_IMAGE ;;
  esac
done
