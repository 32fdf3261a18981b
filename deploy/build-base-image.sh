#!/usr/bin/env bash
# Build a stand-in for the Dockerfile's base image (python:3.11-slim-bookworm) from Debian
# packages, for hosts that reach Debian's mirror but no container registry (CI here,
# air-gapped sites with a local Debian mirror). It provides what the Dockerfile relies on
# from the official image: `python` and `pip` on PATH (a venv in /opt/python whose pip
# installs beside the interpreter, as the official image's does), the Python headers
# (python3-dev, for PyTensor's C compiles), apt with Debian's sources, ca-certificates,
# useradd, and LANG=C.UTF-8.
#
#   deploy/build-base-image.sh [TAG]          # default tag: dnnframe-base:3.11-bookworm
#   docker build --build-arg PYTHON_IMAGE=dnnframe-base:3.11-bookworm -t dnnframe:latest .
#
# Nothing is rebuilt when TAG already exists locally (delete it to refresh the packages).
# Environment: DNNFRAME_BASE_MIRROR (default http://deb.debian.org/debian; a local mirror
# or a snapshot.debian.org URL pins the package versions), DNNFRAME_BASE_SUITE (bookworm),
# DOCKER (the docker CLI to use). Needs root (debootstrap) and a running Docker engine.
set -euo pipefail

TAG="${1:-dnnframe-base:3.11-bookworm}"
SUITE="${DNNFRAME_BASE_SUITE:-bookworm}"
MIRROR="${DNNFRAME_BASE_MIRROR:-http://deb.debian.org/debian}"
DOCKER="${DOCKER:-docker}"

if "$DOCKER" image inspect "$TAG" >/dev/null 2>&1; then
  echo "base image $TAG exists; not rebuilding"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }

rootfs="$(mktemp -d /var/tmp/dnnframe-base.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT

# minbase: Essential packages and apt only; the rest is what the official slim image has
# that the Dockerfile uses. No Recommends, as in the official image.
debootstrap --variant=minbase \
  --include=passwd,ca-certificates,python3,python3-venv,python3-dev \
  "$SUITE" "$rootfs" "$MIRROR"

# The same sources as the official Debian images, so the Dockerfile's apt-get gets
# security updates.
cat > "$rootfs/etc/apt/sources.list" <<SOURCES
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb http://deb.debian.org/debian-security $SUITE-security main
SOURCES

# The official Debian images' container settings, so an `apt-get install` in the Dockerfile
# leaves no .deb files behind and later packages install without docs, man pages and
# translations (the slim variant's dpkg excludes).
cat > "$rootfs/etc/apt/apt.conf.d/docker-clean" <<'APT'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT
cat > "$rootfs/etc/apt/apt.conf.d/docker-no-languages" <<'APT'
Acquire::Languages "none";
APT
cat > "$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'DPKG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
DPKG

chroot "$rootfs" python3 -m venv /opt/python
chroot "$rootfs" apt-get clean
find "$rootfs/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
       "$rootfs"/usr/share/locale/* "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/log/*.log \
       "$rootfs"/tmp/*

tar --numeric-owner --sort=name --mtime='@0' -C "$rootfs" -c . | "$DOCKER" import \
  --change 'ENV PATH=/opt/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["python"]' \
  --message "debootstrap $SUITE from $MIRROR: python3, python3-venv, python3-dev" \
  - "$TAG"
echo "built base image $TAG"
