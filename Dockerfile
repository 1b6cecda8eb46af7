# relayd container image: the wheel is built in stage one and installed into a venv at
# /opt/relayd in stage two, so the final image carries no compiler, no source tree and no caches.
#
#   docker build -t relayd:0.1.0 .
#
# No "# syntax=" line: BuildKit's built-in frontend already runs RUN --mount, and naming a
# frontend image makes an offline or air-gapped build fail fetching it (tests/deploy/test_image.py
# builds and runs this file over a base made with debootstrap; see docs/image.md).
#
# Configuration is only through RELAYD_* environment variables and mounted secret files
# (RELAYD_REDIS_PASSWORD_FILE=/run/secrets/...); see README.md#configuration.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- stage one: wheels for relayd and every runtime dependency -------------------------------
FROM ${PYTHON_IMAGE} AS build

ARG RELAYD_EXTRAS=""
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /src
# Only what the wheel is built from (the .dockerignore is an allow-list as well).
COPY pyproject.toml README.md ./
COPY store ./store
COPY relayd ./relayd

# One directory of wheels: relayd's own plus its dependencies (hiredis, lupa, orjson and msgspec come as
# manylinux wheels, so no compiler is needed in either stage).
RUN pip wheel --wheel-dir /wheels ".${RELAYD_EXTRAS}"

# --- stage two: the runtime image ------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

ARG RELAYD_EXTRAS=""
ARG VERSION=0.1.0
ARG VCS_REF=unknown

LABEL org.opencontainers.image.title="relayd" \
      org.opencontainers.image.description="Durable outbox, spawn and timer relay for Redis-backed statechart executions" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${VCS_REF}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.documentation="https://github.com/relayd/relayd#readme" \
      org.opencontainers.image.source="https://github.com/relayd/relayd"

# A fixed numeric UID/GID so Kubernetes' runAsNonRoot can verify it without a passwd lookup.
RUN groupadd --system --gid 10001 relayd \
 && useradd --system --uid 10001 --gid 10001 --no-log-init --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin relayd

# The venv gets no pip of its own; the base image's pip installs into it from the wheels of
# stage one, bind-mounted so they never become a layer, offline (--no-index) so the image holds
# exactly what stage one resolved. Pinning relayd to VERSION makes the label tell the truth
# (tests/deploy checks the default against pyproject.toml). The last line fails the build if
# a runtime dependency is missing.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m venv --without-pip /opt/relayd \
 && pip --python /opt/relayd/bin/python install --no-cache-dir --no-compile --no-index \
      --find-links=/wheels "relayd${RELAYD_EXTRAS}==${VERSION}" \
 && /opt/relayd/bin/python -m compileall -q /opt/relayd/lib \
 && /opt/relayd/bin/relayd --help > /dev/null

ENV PATH=/opt/relayd/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    RELAYD_METRICS_ADDR=0.0.0.0:9464 \
    RELAYD_LOG_FORMAT=json

USER 10001:10001
EXPOSE 9464

# The slim image has no curl: ask /healthz with the interpreter that is already there.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os,sys,urllib.request as u; p=os.environ.get('RELAYD_METRICS_ADDR','0.0.0.0:9464').rsplit(':',1)[1]; sys.exit(0 if u.urlopen(f'http://127.0.0.1:{p}/healthz',timeout=4).status==200 else 1)"]

STOPSIGNAL SIGTERM
ENTRYPOINT ["relayd"]
# The sink comes from RELAYD_SINK (the manifests set it): with none, sweep exits 2 saying so.
CMD ["sweep"]
