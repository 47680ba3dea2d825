#!/usr/bin/env bash
# Runs every test: unit tests, and integration tests against a throwaway PostgreSQL cluster started here
# (under .local/, removed afterwards). Extra arguments go to `swift test` (e.g. --filter FormFields).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/postgres.sh

pg_ensure_installed
cluster="$PWD/.local/test-postgres-$$"
cleanup() {
    pg_stop "$cluster"
    rm -rf "$cluster"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "==> starting a throwaway PostgreSQL cluster"
pg_start "$cluster"
export PUSHCHAT_TEST_DATABASE_URL="$PG_URL"
echo "    $PUSHCHAT_TEST_DATABASE_URL"

echo "==> swift test"
# Serial: the binary protocol has no acks, so its fault tests cannot tell a CPU-starved gateway from one that
# accepted; parallel suites (HTTP/2 load beside binary drops) starve it on 2 cores.
swift test --no-parallel "$@"
