# The tasq controller image: the wheel built from this checkout on a slim Python, run as non-root.
FROM python:3.11-slim AS build
WORKDIR /src
COPY . .
RUN pip wheel --no-cache-dir --no-deps -w /dist .

FROM python:3.11-slim
COPY --from=build /dist/ /tmp/dist/
RUN pip install --no-cache-dir /tmp/dist/*.whl && rm -rf /tmp/dist \
    && useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin tasq
USER 65532:65532
# Webhooks (9443), metrics and probes (8080); config/manager/ sets the flags.
EXPOSE 9443 8080
ENTRYPOINT ["tasq", "run"]
