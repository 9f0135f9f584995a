# rag-confidence gateway image. Build from the repository root:
#   docker build -f collector/gateway.Dockerfile -t rag-confidence-gateway:0.1.0 .
# (compose.yaml does this for you.)

FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# Wheels of the project and its dependencies (with the gateway extra: its HTTP server), so the runtime stage
# gets no build tools and no source tree.
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[gateway]"

FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin gateway
# Numeric, so Kubernetes can check runAsNonRoot without reading /etc/passwd.
USER 10001:10001
# OTLP gRPC and HTTP (the HTTP listener also serves /healthz and /readyz).
EXPOSE 4317 4318
ENTRYPOINT ["rag-confidence"]
CMD ["gateway"]
