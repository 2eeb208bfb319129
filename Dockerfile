# The tasq controller image: the wheel built from this checkout on a slim Python, run as non-root.
# Reproducible: the base image is pinned by digest, the build tools (requirements-build.lock) and
# the runtime dependencies (requirements.lock, both from hack/lock) are installed by hash only, and
# the wheel's timestamps come from SOURCE_DATE_EPOCH. `hack/release` passes TASQ_COMMIT (git HEAD),
# which `tasq version` and kueue_build_info report.
#
# python:3.11-slim as of 2026-08-16 (Python 3.11.16 on Debian trixie); the digest is the multi-arch
# index, so the same reference pulls the matching image on amd64 and arm64.
ARG PYTHON_IMAGE=python:3.11.16-slim-trixie@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 SOURCE_DATE_EPOCH=315532800
WORKDIR /src
COPY requirements-build.lock /tmp/
RUN pip install --no-cache-dir --require-hashes --no-deps -r /tmp/requirements-build.lock
COPY . .
ARG TASQ_COMMIT=unknown
RUN printf '%s\n' "$TASQ_COMMIT" > controller/data/build-commit \
    && pip wheel --no-cache-dir --no-deps --no-build-isolation -w /dist .

FROM ${PYTHON_IMAGE}
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements.lock /tmp/
RUN pip install --no-cache-dir --require-hashes --no-deps -r /tmp/requirements.lock && rm /tmp/requirements.lock
COPY --from=build /dist/ /tmp/dist/
RUN pip install --no-cache-dir --no-deps /tmp/dist/*.whl && rm -rf /tmp/dist \
    && useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin tasq
USER 65532:65532
# Webhooks (9443), metrics (8443, HTTPS) and probes (8081); config/manager/ and the chart set the flags.
EXPOSE 9443 8443 8081
ENTRYPOINT ["tasq", "run"]
