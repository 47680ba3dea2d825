#!/usr/bin/env bash
# Benchmarks the push path on this machine: builds in release mode, starts a throwaway PostgreSQL and the APNs
# simulator, and prints each figure beside its target. Figures only: nothing here passes or fails a build.
# Extra arguments go to pushchat-bench (e.g. --rows 500000 --samples 500).
#
# --field measures the way the guide deploys (issue 43): PostgreSQL with TLS on (the bench and the processes connect
# with sslmode=require) and Debian's durability (fsync, synchronous_commit, full_page_writes on); the simulator, the
# API and the daemons each a process of its own, run as the unprivileged user pushchat-bench without capabilities
# (as root; otherwise as you), with the simulator's threads at nice -10 (--gateway-nice): it stands in for Apple's
# and Google's servers, which do not share this machine's cores. Its figures are the ones users meet.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/postgres.sh

pg_ensure_installed
# Built the way a release is (`make release`: the Swift runtime linked in, --static-swift-stdlib, in .build-install),
# so the figures are those of the binaries a server runs: a runtime loaded as shared libraries pays for every
# thread-local access and every call into it (retain, release, exclusivity checks) through the dynamic linker.
build=(-c release --static-swift-stdlib --scratch-path .build-install)
echo "==> building in release mode as a release is built (swift build ${build[*]})"
field=no
for argument in "$@"; do [ "$argument" = --field ] && field=yes; done
for product in pushchat-push pushchat-api pushchat-feedback pushchat-apns-sim pushchat-bench; do
    swift build "${build[@]}" --product "$product"
done
bin=$(swift build "${build[@]}" --show-bin-path)

export PUSHCHAT_DEV_PASSPHRASE=${PUSHCHAT_DEV_PASSPHRASE:-pushchat}
./deploy/dev-certs.sh .local/certs >/dev/null
certs=.local/certs

cluster="$PWD/.local/bench-postgres-$$"
cleanup() {
    pg_stop "$cluster"
    rm -rf "$cluster" "$cluster.tls" "$cluster.certs"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
extra=()
if [ "$field" = yes ]; then
    PG_DURABLE=1 pg_start "$cluster" tls
    PG_URL="$PG_URL?sslmode=require"
    if [ "$(id -u)" -eq 0 ]; then
        user=pushchat-bench
        id -u "$user" >/dev/null 2>&1 \
            || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user"
        # The certificates and keys as the guide installs them: readable by the service's group only.
        install -d -m 750 -o root -g "$user" "$cluster.certs"
        install -m 640 -o root -g "$user" "$certs"/* "$cluster.certs/"
        certs=$cluster.certs
        setpriv --reuid="$user" --regid="$user" --init-groups test -x "$bin/pushchat-push" \
            || { echo "the user $user cannot run $bin/pushchat-push (is a parent folder not traversable?)" >&2; exit 1; }
        extra=(--service-user "$user")
    fi
else
    pg_start "$cluster"
fi

echo
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "software: $(swift --version 2>&1 | head -n 1 | sed 's/ (.*//'), $(psql --version), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%Y-%m-%d)"
"$bin/pushchat-bench" --database-url "$PG_URL" --bin-dir "$bin" --certs "$certs" --passphrase "$PUSHCHAT_DEV_PASSPHRASE" "${extra[@]}" "$@"
