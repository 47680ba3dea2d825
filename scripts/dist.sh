#!/usr/bin/env bash
# `make dist`: the release, built once, as one tarball a server installs without Swift, git or make.
#
#   dist/pushchat-VERSION/                the release as it is installed (pushchat-release install copies it whole)
#     bin/                                pushchat-api, pushchat-push, pushchat-feedback (the Swift runtime linked in,
#                                         debug information stripped), pushchat-release (install, upgrade,
#                                         switch) and pushchat-backup (the nightly backup, the restore drill)
#     migrations/ config/ deploy/         the SQL files, the example configuration, units, timers, examples, guide
#     VERSION                             the commit's date and hash ("-modified" when the tree had changes)
#     SHA256SUMS                          every file above, checked again on the server before and after the copy
#   dist/pushchat-VERSION.tar.gz          that folder, to copy to the server
#   dist/pushchat-VERSION.tar.gz.sha256   the tarball's checksum, for `sha256sum -c` after the copy
#
# Usage: scripts/dist.sh BIN_DIR PROGRAM...   (the Makefile's `dist` builds BIN_DIR first)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: scripts/dist.sh BIN_DIR PROGRAM...}
shift

version=$({ git log -1 --format=%cd-%h --date=format:%Y%m%d%H%M%S 2>/dev/null || date +%Y%m%d%H%M%S-local; } | tr -d '\n')
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then version=$version-modified; fi
[[ "$version" =~ ^[A-Za-z0-9._-]+$ ]] || { echo "dist: unusable version '$version'" >&2; exit 1; }

for program in "$@"; do
    [ -x "$bin/$program" ] || { echo "dist: $bin/$program is missing" >&2; exit 1; }
    # Anything beyond the C library's own would have to be on every server, at the build machine's path. libstdc++,
    # libgcc_s and zlib count as the C library's: apt and dpkg need them, so every Debian has them.
    extra=$(ldd "$bin/$program" | awk '{ print $1 }' | grep -Ev '^(linux-vdso\.so|/lib64/ld-linux|/lib/ld-linux|lib(c|m|dl|rt|pthread|util|gcc_s|stdc\+\+|z)\.so)' || true)
    if [ -n "$extra" ]; then
        echo "dist: $program needs libraries a server may lack (build with --static-swift-stdlib):" >&2
        echo "$extra" >&2
        exit 1
    fi
done

name=pushchat-$version
out=dist/$name
rm -rf "$out" "$out.tar.gz" "$out.tar.gz.sha256"
install -d -m 755 "$out/bin" "$out/migrations" "$out/config" "$out/deploy/systemd"
for program in "$@"; do
    install -m 755 "$bin/$program" "$out/bin/$program"
    # Debug information is most of the size; symbols stay, so crash backtraces keep their names.
    if command -v strip >/dev/null; then strip --strip-debug "$out/bin/$program"; fi
done
install -m 755 deploy/pushchat-release deploy/pushchat-backup "$out/bin/"
install -m 644 migrations/*.sql "$out/migrations/"
install -m 644 config/pushchat.json "$out/config/"
install -m 644 deploy/README.md deploy/crontab deploy/pushchat.env.example deploy/apns.env.example deploy/grants.sql \
    deploy/prometheus.yml deploy/alerts.yml deploy/alerts-test.yml deploy/nginx-pushchat.conf deploy/nginx-acme.conf \
    deploy/nftables-pushchat.nft deploy/pgbouncer.ini "$out/deploy/"
install -m 755 deploy/dev-certs.sh "$out/deploy/"
install -m 644 deploy/systemd/*.service deploy/systemd/*.timer "$out/deploy/systemd/"
echo "$version" >"$out/VERSION"
(cd "$out" && find . -type f ! -name SHA256SUMS | sed 's#^\./##' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
# Owned by root in the listing, whoever built it: the files unpacked as root belong to root.
tar --owner=0 --group=0 --numeric-owner -czf "$out.tar.gz" -C dist "$name"
(cd dist && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
echo "dist/$name.tar.gz ($(du -h "$out.tar.gz" | cut -f1)): install it with pushchat-release (deploy/README.md, §1)"
