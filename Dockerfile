# One image for the worker, the dashboard and Flower: docker-compose.yml picks the command.
#
# Build:  DOCKER_BUILDKIT=1 docker build -t dnnframe:latest .
# Extras: --build-arg DNNFRAME_EXTRAS=all,monitoring,mnist1d   (pyproject.toml's optional
#         groups; the stack needs all (worker, dashboard, MongoDB store) and monitoring (Flower))
# Base:   --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:<digest> pins the base
#         by digest for byte-for-byte rebuilds (the tag alone follows Debian security
#         updates); where no registry is reachable, deploy/build-base-image.sh builds a
#         stand-in from Debian packages (docs/deploy.md, "Air-gapped hosts").
# CAs:    --secret id=ca-certificates,src=/etc/ssl/certs/ca-certificates.crt lets pip trust
#         a proxy's certificate authority during the build without storing it in the image.
#
# GPU:    --build-arg DNNFRAME_EXTRAS=all,monitoring,gpu -t dnnframe:gpu adds JAX's CUDA 12 build
#         (its pip wheels bring the CUDA libraries; the host gives the NVIDIA driver through
#         the NVIDIA container toolkit); compose's `gpu` profile builds and uses that image.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
FROM ${PYTHON_IMAGE}

# g++: PyTensor compiles each graph's C code at run time; libopenblas-dev: the BLAS it links
# (-lopenblas, set in PYTENSOR_FLAGS below). The static OpenBLAS archives (56 MB) are never
# linked (the shared library is), so they are left out. Debian's versions are not pinned on
# purpose: the base tag moves with Debian's security updates and a pin would break the build.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends g++ libopenblas-dev \
 && find /usr/lib -path '*openblas*' -name '*.a' -delete \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*

# base_compiledir lives on a volume so compiled graphs survive container restarts and are
# shared by every worker replica (PyTensor locks the directory itself). The default store,
# a SQLite file on the data volume, is the entrypoint's (not an ENV here, which `docker
# inspect` would show beside the URL compose hands over as a file). THEANO_FLAGS is not
# set here: compose passes it through and the engine maps it.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTENSOR_FLAGS=base_compiledir=/cache/pytensor,blas__ldflags=-lopenblas \
    DNNFRAME_DATA_DIR=/data

# A fixed uid so files on bind mounts and named volumes have a predictable owner. The
# directories exist before VOLUME so a new named volume starts out owned by that user.
RUN useradd --create-home --uid 10001 --user-group dnnframe \
 && mkdir -p /cache/pytensor /data /opt/dnnframe/pytensor-seed \
 && chown dnnframe:dnnframe /cache/pytensor /data /opt/dnnframe /opt/dnnframe/pytensor-seed

WORKDIR /app
# Dependencies in their own layer, rebuilt only when pyproject.toml or setup.py change:
# the project is installed once as empty packages (and a blank README) to pull in its
# dependencies, and replaced by the real sources further down. The build backend is
# installed here too, so that step builds without fetching it again (--no-build-isolation).
# The install step is .ci/run's (`pip install -e ".[...]"`) less -e: the image holds no
# working tree to edit; tests/deploy checks the two stay the same. The version ranges
# live in pyproject.toml (DL3013 asks for pins on the command line).
ARG DNNFRAME_EXTRAS=all,monitoring
COPY pyproject.toml setup.py ./
# hadolint ignore=DL3013
RUN --mount=type=secret,id=ca-certificates \
    if [ -s /run/secrets/ca-certificates ]; then export PIP_CERT=/run/secrets/ca-certificates; fi \
 && mkdir dnnframe tasks dashboard \
 && touch README.md dnnframe/__init__.py tasks/__init__.py dashboard/__init__.py \
 && pip install --no-cache-dir ".[${DNNFRAME_EXTRAS}]" \
 && pip install --no-cache-dir "setuptools>=68" wheel \
 && rm -rf README.md dnnframe tasks dashboard build ./*.egg-info

COPY README.md ./
COPY dnnframe ./dnnframe
COPY tasks ./tasks
COPY dashboard ./dashboard
COPY experiments ./experiments
COPY deploy/dnnframe-entrypoint /usr/local/bin/dnnframe-entrypoint
# hadolint ignore=DL3013
RUN --mount=type=secret,id=ca-certificates \
    if [ -s /run/secrets/ca-certificates ]; then export PIP_CERT=/run/secrets/ca-certificates; fi \
 && pip install --no-cache-dir --no-deps --no-build-isolation . \
 && rm -rf build ./*.egg-info

# Numeric, so runtimes that check "non-root" without reading /etc/passwd can verify it.
USER 10001:10001
# PyTensor's C code for the quickstart's graphs, compiled once here into /cache/pytensor
# and copied aside to /opt/dnnframe/pytensor-seed: the entrypoint copies it into the cache
# volume once, under a lock, so a fresh stack's first sweep finds the common ops
# (elementwise, gemm, the optimisers' updates) built. The image's /cache/pytensor stays
# empty, because Docker's own copy into a new named volume races when several containers
# mount it at once (worker replicas, the dashboard): "mkdir ...: file exists". The ops are
# compiled for the build host's CPU; PyTensor spells -march=native out in its cache keys,
# so on another CPU it compiles what it needs instead of loading them. The seed's id (a
# checksum of its file list) names the marker, so a newer image seeds an old volume again.
# /cache/pytensor is a BuildKit cache mount here, kept by the builder between builds and
# never part of the image: a rebuild after a source change loads the modules whose C code
# did not change (PyTensor keys each by its code) where it compiled all of them again (73 s
# of a 2-core machine's build). The seed is then the mount's whole content.
RUN --mount=type=cache,id=dnnframe-pytensor-seed,target=/cache/pytensor,uid=10001,gid=10001 \
    DNNFRAME_STORE_URL=sqlite:////tmp/warm-up.db dnnframe run --local --quiet \
        experiments/quickstart.yaml \
 && rm -f /tmp/warm-up.db* \
 && cp -a /cache/pytensor/. /opt/dnnframe/pytensor-seed/ \
 && find /opt/dnnframe/pytensor-seed -mindepth 1 -printf '%P\n' > /tmp/seed-files \
 && sort -o /tmp/seed-files /tmp/seed-files \
 && sha256sum < /tmp/seed-files > /opt/dnnframe/pytensor-seed.id \
 && rm /tmp/seed-files
VOLUME ["/cache/pytensor", "/data"]
EXPOSE 8000 5555
ENTRYPOINT ["dnnframe-entrypoint"]
CMD ["dnnframe", "--help"]
