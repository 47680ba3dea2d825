#!/usr/bin/env bash
# Benchmarks the push path on this machine: builds in release mode, starts a throwaway PostgreSQL and the APNs
# simulator, and prints each figure beside its target. Figures only: nothing here passes or fails a build.
# Extra arguments go to pushchat-bench (e.g. --rows 500000 --samples 500).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/postgres.sh

pg_ensure_installed
echo "==> building in release mode (swift build -c release --scratch-path .build-release)"
for product in pushchat-push pushchat-api pushchat-feedback pushchat-bench; do
    swift build -c release --scratch-path .build-release --product "$product"
done
bin=$(swift build -c release --scratch-path .build-release --show-bin-path)

export PUSHCHAT_DEV_PASSPHRASE=${PUSHCHAT_DEV_PASSPHRASE:-pushchat}
./deploy/dev-certs.sh .local/certs >/dev/null

cluster="$PWD/.local/bench-postgres-$$"
cleanup() {
    pg_stop "$cluster"
    rm -rf "$cluster"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
pg_start "$cluster"

echo
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "software: $(swift --version 2>&1 | head -n 1 | sed 's/ (.*//'), $(psql --version), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%Y-%m-%d)"
"$bin/pushchat-bench" --database-url "$PG_URL" --bin-dir "$bin" --certs .local/certs --passphrase "$PUSHCHAT_DEV_PASSPHRASE" "$@"
