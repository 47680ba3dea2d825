#!/usr/bin/env bash
# Installs PushChat Server under PREFIX (called by `make install PREFIX=...`; it builds nothing: `make release` first):
#   PREFIX/bin/           pushchat-api, pushchat-push, pushchat-feedback (the Swift runtime linked in)
#   PREFIX/migrations/    the numbered SQL files `pushchat-api migrate` applies
#   PREFIX/config/        pushchat.json, the example configuration the guide copies to /etc/pushchat
#   PREFIX/deploy/        systemd units and timers, crontab, environment file examples, the guide
# Usage: scripts/install.sh PREFIX BIN_DIR PROGRAM...
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:?usage: scripts/install.sh PREFIX BIN_DIR PROGRAM...}
bin=${2:?usage: scripts/install.sh PREFIX BIN_DIR PROGRAM...}
shift 2

for program in "$@"; do
    [ -x "$bin/$program" ] || { echo "install: $bin/$program is missing: run make release first (as yourself, not as root)" >&2; exit 1; }
    # A binary that still needs the toolchain's runtime (libswiftCore.so, libFoundation.so…) would start only on a
    # machine with Swift installed at the build machine's path.
    if ldd "$bin/$program" | grep -Eq 'libswift|libFoundation|libdispatch|libBlocksRuntime'; then
        echo "install: $program links the Swift runtime dynamically:" >&2
        ldd "$bin/$program" | grep -E 'libswift|libFoundation|libdispatch|libBlocksRuntime' >&2
        exit 1
    fi
done

install -d -m 755 "$prefix/bin" "$prefix/migrations" "$prefix/config" "$prefix/deploy/systemd"
for program in "$@"; do
    install -m 755 "$bin/$program" "$prefix/bin/$program"
    # Debug information is most of the size; symbols stay, so crash backtraces keep their names.
    if command -v strip >/dev/null; then strip --strip-debug "$prefix/bin/$program"; fi
done
install -m 644 migrations/*.sql "$prefix/migrations/"
install -m 644 config/pushchat.json "$prefix/config/"
install -m 644 deploy/README.md deploy/crontab deploy/pushchat.env.example deploy/apns.env.example deploy/grants.sql \
    deploy/prometheus.yml deploy/alerts.yml \
    deploy/nginx-pushchat.conf deploy/pgbouncer.ini "$prefix/deploy/"
install -m 755 deploy/dev-certs.sh "$prefix/deploy/"
install -m 644 deploy/systemd/*.service deploy/systemd/*.timer "$prefix/deploy/systemd/"
echo "installed $* under $prefix"
