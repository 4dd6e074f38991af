#!/usr/bin/env bash
# Sets up a fresh Debian machine for adk-state: system packages for the test
# backends and the browser test, the pinned pnpm, the workspace's dependencies,
# and a build. Each step's full output goes to .tmp/setup/<step>.log and is
# shown only when the step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1
logs=.tmp/setup
mkdir -p "$logs"

# quietly <step> <command…>: runs the command with its output in the step's log.
quietly() {
  local step=$1
  shift
  local started=$SECONDS
  if ! "$@" >"$logs/$step.log" 2>&1; then
    echo "setup: $step failed; the last lines of $logs/$step.log:" >&2
    tail -n 60 "$logs/$step.log" >&2
    exit 1
  fi
  echo "setup: $step done ($((SECONDS - started)) s)"
}

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
# PostgreSQL is for `pnpm bench` (ADK's DatabaseSessionService as a peer); g++/make build sqlite3.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++ make)
# MariaDB is for the CLI's tests of ADK's DatabaseSessionService on mariadb:// and mysql:// sources.
[ -x /usr/sbin/mariadbd ] || [ -n "${MARIADB_BIN:-}" ] || need_apt+=(mariadb-server)
# The CLI's dev-UI test drives Debian's Chromium (or the browser CHROMIUM_PATH names).
[ -x "${CHROMIUM_PATH:-}" ] || command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ "${#need_apt[@]}" -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "setup: installing ${need_apt[*]} with apt"
  quietly apt-update $SUDO apt-get update -qq
  quietly apt-install env DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}"
  # The tests start their own servers; the distribution's services are not needed.
  $SUDO service redis-server stop >/dev/null 2>&1 || true
  $SUDO service postgresql stop >/dev/null 2>&1 || true
  $SUDO service mariadb stop >/dev/null 2>&1 || true
fi

pnpm_version=$(node -p "require('./package.json').packageManager.split('@')[1]")
if [ "$(pnpm --version 2>/dev/null || true)" != "$pnpm_version" ]; then
  quietly pnpm-install npm install -g "pnpm@$pnpm_version" --no-audit --no-fund
fi

quietly dependencies pnpm install --frozen-lockfile --reporter=append-only
quietly build pnpm exec turbo run build --output-logs=errors-only
echo "setup: ready (logs in $logs)"
