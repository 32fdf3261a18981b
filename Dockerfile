# syntax=docker/dockerfile:1
# One image for the worker, the dashboard and Flower: docker-compose.yml picks the command.
#
# Build:  docker build -t dnnframe:latest .
# Extras: --build-arg DNNFRAME_EXTRAS=monitoring,mnist1d   (pyproject.toml's optional groups)
# Base:   --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:<digest> pins the base
#         by digest for byte-for-byte rebuilds (the tag alone follows Debian security updates).
#
# There is no separate CUDA image: PyTensor has no CUDA backend, so a GPU host runs this
# same image; see docs/deploy.md ("GPU hosts") for what the compose `gpu` profile does.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
FROM ${PYTHON_IMAGE}

# g++: PyTensor compiles each graph's C code at run time; libopenblas-dev: the BLAS it links
# (-lopenblas, set in PYTENSOR_FLAGS below). Debian's versions are not pinned on purpose:
# the base tag moves with Debian's security updates and a pin would break the build.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends g++ libopenblas-dev \
 && rm -rf /var/lib/apt/lists/*

# base_compiledir lives on a volume so compiled graphs survive container restarts and are
# shared by every worker replica (PyTensor locks the directory itself).
# THEANO_FLAGS is not set here: compose passes it through and the engine maps it.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTENSOR_FLAGS=base_compiledir=/cache/pytensor,blas__ldflags=-lopenblas \
    DNNFRAME_DATA_DIR=/data

# A fixed uid so files on bind mounts and named volumes have a predictable owner. The
# directories exist before VOLUME so a new named volume starts out owned by that user.
RUN useradd --create-home --uid 10001 --user-group dnnframe \
 && mkdir -p /cache/pytensor /data \
 && chown dnnframe:dnnframe /cache/pytensor /data

WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY dnnframe ./dnnframe
COPY tasks ./tasks
COPY dashboard ./dashboard
COPY experiments ./experiments

# The project's own install step, the same as .ci/run's (`pip install -e ".[...]"`) less -e:
# the image holds no working tree to edit. tests/deploy checks the two stay the same.
# The version ranges live in pyproject.toml (DL3013 asks for pins on the command line).
ARG DNNFRAME_EXTRAS=monitoring
# hadolint ignore=DL3013
RUN pip install --no-cache-dir ".[${DNNFRAME_EXTRAS}]"

# Numeric, so runtimes that check "non-root" without reading /etc/passwd can verify it.
USER 10001:10001
VOLUME ["/cache/pytensor", "/data"]
EXPOSE 8000 5555
CMD ["dnnframe", "--help"]
