#!/usr/bin/env bash
# Sets up a fresh Debian machine for adk-state: system packages for the test
# backends, the pinned pnpm, the workspace's dependencies, and a build.
set -euo pipefail
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)
# PostgreSQL is for `pnpm bench` (ADK's DatabaseSessionService as a peer); g++/make build sqlite3.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++ make)
if [ "${#need_apt[@]}" -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  echo "setup: installing ${need_apt[*]} with apt"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
  # The tests start their own servers; the distribution's service is not needed.
  $SUDO service redis-server stop >/dev/null 2>&1 || true
  $SUDO service postgresql stop >/dev/null 2>&1 || true
fi

pnpm_version=$(node -p "require('./package.json').packageManager.split('@')[1]")
if [ "$(pnpm --version 2>/dev/null || true)" != "$pnpm_version" ]; then
  echo "setup: installing pnpm@$pnpm_version"
  npm install -g "pnpm@$pnpm_version" --silent
fi

pnpm install --frozen-lockfile
pnpm build
