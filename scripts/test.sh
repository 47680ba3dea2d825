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
    rm -rf "$cluster" "$cluster.tls"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "==> starting a throwaway PostgreSQL cluster (ssl = on, self-signed certificate, as Debian's)"
pg_start "$cluster" tls
export PUSHCHAT_TEST_DATABASE_URL="$PG_URL"
export PUSHCHAT_TEST_DATABASE_CA="$PG_CA_FILE"
echo "    $PUSHCHAT_TEST_DATABASE_URL"

echo "==> swift build --build-tests"
swift build --build-tests

# As root, the executables the tests start run as an unprivileged user without capabilities, as systemd runs them
# (User=, CapabilityBoundingSet=): a privilege the code needs by accident fails here, not in production.
if [ "$(id -u)" -eq 0 ]; then
    service_user=pushchat-test
    if ! id -u "$service_user" >/dev/null 2>&1; then
        echo "==> creating the system user $service_user (the tests run the executables as it)"
        useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$service_user"
    fi
    bin=$(swift build --show-bin-path)
    if ! setpriv --reuid="$service_user" --regid="$service_user" --init-groups test -x "$bin/pushchat-api"; then
        echo "the user $service_user cannot run $bin/pushchat-api (is a parent folder not traversable?)" >&2
        exit 1
    fi
    export PUSHCHAT_TEST_SERVICE_USER=$service_user
    echo "    executables run as $service_user (setpriv: no capabilities, no new privileges)"
fi

echo "==> swift test"
# Serial: the binary protocol has no acks, so its fault tests cannot tell a CPU-starved gateway from one that
# accepted; parallel suites (HTTP/2 load beside binary drops) starve it on 2 cores.
swift test --no-parallel "$@"
