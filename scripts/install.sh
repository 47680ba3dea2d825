#!/usr/bin/env bash
# Installs PushChat Server under PREFIX as a release of its own (called by `make install PREFIX=...`; it builds
# nothing: `make release` first), then points PREFIX/current at it:
#   PREFIX/releases/VERSION/bin/          pushchat-api, pushchat-push, pushchat-feedback (the Swift runtime linked in)
#   PREFIX/releases/VERSION/migrations/   the numbered SQL files `pushchat-api migrate` applies
#   PREFIX/releases/VERSION/config/       pushchat.json, the example configuration the guide copies to /etc/pushchat
#   PREFIX/releases/VERSION/deploy/       systemd units and timers, crontab, environment file examples, the guide
#   PREFIX/current -> releases/VERSION    what the units run; the previous releases stay for a rollback
# VERSION is the one `make release` wrote beside the binaries (BIN_DIR/pushchat-version: the commit's date and
# hash). Installing a version again replaces its folder; running processes keep the files they opened.
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
version=$(cat "$bin/pushchat-version" 2>/dev/null) || {
    echo "install: $bin/pushchat-version is missing: run make release first" >&2
    exit 1
}
[[ "$version" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "install: unusable version '$version'" >&2; exit 1; }
if [ -e "$prefix/bin" ] && [ ! -L "$prefix/bin" ]; then
    echo "install: $prefix/bin is a flat install from before releases/: move it aside first (deploy/README.md, §16)" >&2
    exit 1
fi

release=$prefix/releases/$version
staging=$prefix/releases/.$version.new
rm -rf "$staging"
install -d -m 755 "$staging/bin" "$staging/migrations" "$staging/config" "$staging/deploy/systemd"
for program in "$@"; do
    install -m 755 "$bin/$program" "$staging/bin/$program"
    # Debug information is most of the size; symbols stay, so crash backtraces keep their names.
    if command -v strip >/dev/null; then strip --strip-debug "$staging/bin/$program"; fi
done
install -m 644 migrations/*.sql "$staging/migrations/"
install -m 644 config/pushchat.json "$staging/config/"
install -m 644 deploy/README.md deploy/crontab deploy/pushchat.env.example deploy/apns.env.example deploy/grants.sql \
    deploy/prometheus.yml deploy/alerts.yml deploy/alerts-test.yml deploy/nginx-pushchat.conf deploy/pgbouncer.ini "$staging/deploy/"
install -m 755 deploy/dev-certs.sh "$staging/deploy/"
install -m 644 deploy/systemd/*.service deploy/systemd/*.timer "$staging/deploy/systemd/"
echo "$version" >"$staging/VERSION"
rm -rf "$release"
mv "$staging" "$release"
# The switch is one rename: a unit started at any moment sees the old release or the new one, never half of each.
ln -sfn "releases/$version" "$prefix/.current.new"
mv -T "$prefix/.current.new" "$prefix/current"
echo "installed $* as $release; $prefix/current -> releases/$version"
