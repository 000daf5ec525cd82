# dpfit: migrates the database, then serves (SQLite + local worker processes by default).
# Build: docker build -t dpfit .   Run: docker run -p 8000:8000 -v dpfit-data:/data dpfit
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DPFIT_DATABASE_URL=sqlite:////data/dpfit.db \
    DPFIT_DATA_ROOTS=/data/sources:/app/examples

RUN useradd --create-home --uid 10001 dpfit \
    && mkdir -p /data/sources /app \
    && chown -R dpfit:dpfit /data /app

WORKDIR /app
# Dependencies first, from the lock of exact versions with hashes (its own layer: rebuilt only
# when the lock changes); then the project itself, without resolving anything again.
COPY --chown=dpfit:dpfit requirements.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements.lock
COPY --chown=dpfit:dpfit pyproject.toml README.md alembic.ini ./
COPY --chown=dpfit:dpfit service ./service
COPY --chown=dpfit:dpfit alembic ./alembic
COPY --chown=dpfit:dpfit examples ./examples
COPY --chown=dpfit:dpfit sdk/python ./sdk/python
# The service and the client the CLI's HTTP commands use (as `make serve` installs them).
RUN pip install --no-cache-dir --no-deps -e . -e ./sdk/python

USER dpfit
VOLUME ["/data"]
EXPOSE 8000
# Healthy once /healthz answers 2xx (the slim image has no curl: Python's urllib; a non-2xx or
# no answer exits 1). The start period covers the migrations and the Dask cluster's start.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
# `dpfit serve` runs the Alembic migrations before it starts serving, with the same connection
# hardening as everywhere (service/api/server.py: head/body deadlines, a connection cap, bounded
# logs; the DPFIT_* settings of docs/operations.md). It binds every interface of the container:
# publish the port on the host's loopback (-p 127.0.0.1:8000:8000) unless a proxy fronts it.
CMD ["dpfit", "serve", "--host", "0.0.0.0", "--port", "8000"]
