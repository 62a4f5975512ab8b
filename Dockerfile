# frame's image: the project installed with pip (as `make setup` does), run by the Prefect worker
# (docker-compose.yml `worker`, command docker/worker-entrypoint.sh).
#   docker build -t frame:latest .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Non-root user; the folders that become volumes are created (and owned) here, so a fresh named
# volume starts out writable by it.
RUN useradd --create-home --uid 1000 --shell /bin/bash frame \
    && mkdir -p /app/data /data/cache \
    && chown -R frame:frame /app /data
WORKDIR /app

# torch first, pinned as in pyproject (an unpinned torch, also one pulled in by sentence-transformers,
# resolves to a multi-GB CUDA build). The machine this project was set up on serves a local CPU wheel
# for torch==2.13.0 through pip's own configuration; elsewhere build with the CPU index:
#   docker build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu -t frame:latest .
# (= pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu)
ARG TORCH_INDEX_URL=""
RUN python -m pip install --upgrade pip \
    && python -m pip install "torch==2.13.0" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}

# The project, from the repo's pyproject, editable like the Makefile's `pip install -e '.[dev]'`
# (EXTRAS=dev adds the test tools). pip, not uv/poetry: they would not see the local torch wheel.
ARG EXTRAS=""
COPY --chown=frame:frame . /app
RUN python -m pip install -e ".${EXTRAS:+[$EXTRAS]}" \
    && chmod +x docker/worker-entrypoint.sh

USER frame
ENV FRAME_HOME=/app \
    PREFECT_HOME=/home/frame/.prefect \
    PREFECT_LOCAL_STORAGE_PATH=/data/cache/prefect-results \
    PREFECT_RESULTS_PERSIST_BY_DEFAULT=true \
    PREFECT_SERVER_ANALYTICS_ENABLED=false \
    PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=120 \
    FRAME_CACHE_DIR=/data/cache \
    HF_HUB_OFFLINE=1

VOLUME ["/app/data", "/data/cache"]
CMD ["bash", "docker/worker-entrypoint.sh"]
