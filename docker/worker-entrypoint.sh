#!/usr/bin/env bash
# frame's Prefect worker: wait for the Prefect API, make sure the `frame` work pool (process type)
# exists, register the deployments of prefect.yaml, then become the worker.
# The same script runs in the image (docker-compose.yml `worker`) and locally:
#   PREFECT_API_URL=http://127.0.0.1:4200/api docker/worker-entrypoint.sh
# Every path comes from the environment, with defaults relative to this script's project folder.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export FRAME_HOME="${FRAME_HOME:-$(dirname "$here")}"
# prefect.yaml templates its parameters with these ({{ $FRAME_CONFIG }}): it has no default syntax.
export FRAME_CONFIG="${FRAME_CONFIG:-$FRAME_HOME/configs/demo.toml}"
export FRAME_RELEASE="${FRAME_RELEASE:-demo}"
# What `configure_prefect` sets for the CLI; the flow runs the worker starts inherit it.
export FRAME_CACHE_DIR="${FRAME_CACHE_DIR:-$FRAME_HOME/data/cache}"
export PREFECT_LOCAL_STORAGE_PATH="${PREFECT_LOCAL_STORAGE_PATH:-$FRAME_CACHE_DIR/prefect-results}"
export PREFECT_RESULTS_PERSIST_BY_DEFAULT="${PREFECT_RESULTS_PERSIST_BY_DEFAULT:-true}"
export PREFECT_SERVER_ANALYTICS_ENABLED="${PREFECT_SERVER_ANALYTICS_ENABLED:-false}"
export PREFECT_LOGGING_LEVEL="${PREFECT_LOGGING_LEVEL:-INFO}"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
# The worker's health endpoint (GET /health), used by the compose healthcheck.
export PREFECT_WORKER_WEBSERVER_HOST="${PREFECT_WORKER_WEBSERVER_HOST:-127.0.0.1}"
export PREFECT_WORKER_WEBSERVER_PORT="${PREFECT_WORKER_WEBSERVER_PORT:-8080}"
: "${PREFECT_API_URL:?set PREFECT_API_URL to the Prefect server API, e.g. http://prefect-server:4200/api}"

POOL=frame                                   # the work pool every deployment in prefect.yaml names
WAIT_S="${FRAME_API_WAIT_S:-180}"            # how long to wait for the API before giving up
LIMIT="${FRAME_WORKER_LIMIT:-1}"             # concurrent flow runs (a build holds the data-folder lock)
NAME="${FRAME_WORKER_NAME:-frame-$(hostname)}"

# The prefect CLI on PATH (the image), else the project's venv (a local checkout).
if command -v prefect >/dev/null 2>&1; then
  PREFECT="$(command -v prefect)"
elif [[ -x "$FRAME_HOME/.venv/bin/prefect" ]]; then
  PREFECT="$FRAME_HOME/.venv/bin/prefect"
else
  echo "worker-entrypoint: no prefect CLI on PATH nor in $FRAME_HOME/.venv" >&2
  exit 1
fi
PYTHON="$(dirname "$PREFECT")/python"
[[ -x "$PYTHON" ]] || PYTHON="$(command -v python3)"

log() { echo "worker-entrypoint: $*" >&2; }

log "waiting up to ${WAIT_S}s for $PREFECT_API_URL/health"
"$PYTHON" - "$PREFECT_API_URL" "$WAIT_S" <<'PY'
import sys
import time
import urllib.request

url, wait = sys.argv[1].rstrip("/") + "/health", float(sys.argv[2])
deadline = time.monotonic() + wait
last = "no answer"
while True:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            if resp.status == 200:
                sys.exit(0)
            last = f"HTTP {resp.status}"
    except Exception as exc:  # connection refused while the server starts, timeouts, ...
        last = str(exc)
    if time.monotonic() >= deadline:
        sys.exit(f"worker-entrypoint: {url} not healthy after {wait:.0f}s ({last})")
    time.sleep(2)
PY

if "$PREFECT" work-pool inspect "$POOL" >/dev/null 2>&1; then
  log "work pool $POOL exists"
else
  log "creating work pool $POOL (process)"
  # Another worker may create it at the same moment: then it exists, which is all we need.
  "$PREFECT" work-pool create "$POOL" --type process >/dev/null \
    || "$PREFECT" work-pool inspect "$POOL" >/dev/null
fi

cd "$FRAME_HOME"
if [[ "${FRAME_REGISTER_DEPLOYMENTS:-1}" == "1" ]]; then
  log "registering deployments from $FRAME_HOME/prefect.yaml (config $FRAME_CONFIG, release $FRAME_RELEASE)"
  "$PREFECT" --no-prompt deploy --all --prefect-file "$FRAME_HOME/prefect.yaml"
fi

log "starting worker $NAME on pool $POOL (limit $LIMIT)"
exec "$PREFECT" worker start --pool "$POOL" --type process --name "$NAME" --limit "$LIMIT" \
  --install-policy never --with-healthcheck
