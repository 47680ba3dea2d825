#!/usr/bin/env bash
# The units under a real systemd (the guide's §7): a Debian bookworm root (debootstrap, minbase with systemd) booted
# with systemd-nspawn, the release installed in it from its tarball with pushchat-release, the units copied and
# enabled as the guide does, PostgreSQL and the APNs simulator on this machine's loopback (the container shares its
# network). Then, with systemd enforcing every setting of the units (SystemCallFilter=, MemoryDenyWriteExecute=,
# RestrictAddressFamilies=, ProtectSystem=, PrivateTmp=…, which scripts/lib/unit.py does not):
#
#   1. `systemctl enable` then boot: the API and the push daemon are active, ready, and a chat message arrives at the
#      simulator; the journal has their lines;
#   2. a timer fires (pushchat-prune.timer with a drop-in OnActiveSec=) and its service succeeds, writing its metrics
#      file;
#   3. a configuration error (exit 78) is not restarted (RestartPreventExitStatus=78); a crash (SIGKILL) is;
#   4. `systemctl stop` ends each service with success within TimeoutStopSec=;
#   5. `systemd-analyze security` scores each unit: the guide (§7) must state the scores measured here.
#
# Needs root, systemd-nspawn (Debian's systemd-container) and debootstrap; scripts/test.sh installs both. The root
# is built once into .local/nspawn-bookworm (about 35 s and 250 MB from Debian's mirror) and copied for each run.
# The release is the newest dist/pushchat-*.tar.gz (make dist builds it when there is none).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
. scripts/lib/postgres.sh

[ "$(id -u)" -eq 0 ] || { echo "systemd-test: needs root (debootstrap, systemd-nspawn)" >&2; exit 1; }
for tool in systemd-nspawn debootstrap nsenter; do
    command -v "$tool" >/dev/null || { echo "systemd-test: $tool is missing (scripts/test.sh installs it)" >&2; exit 1; }
done

scratch=$(mktemp -d /var/tmp/pushchat-systemd-test.XXXXXX)
chmod 755 "$scratch"
root=$scratch/root
cache=$repo/.local/nspawn-bookworm
nspawn_pid=""
simulator_pid=""
start=$(date +%s)

step() { echo "==> systemd-test: $*"; }
die() {
    echo "systemd-test: FAILED: $*" >&2
    [ -f "$scratch/console.log" ] && { echo "--- the container's console" >&2; tail -n 40 "$scratch/console.log" >&2; }
    if [ -n "${leader:-}" ] && kill -0 "$leader" 2>/dev/null; then
        echo "--- journalctl (pushchat units)" >&2
        in_container journalctl --no-pager -n 40 -u 'pushchat-*' >&2 || true
    fi
    # Again after the logs: a CI that keeps only the end of the output still says what failed.
    echo "systemd-test: FAILED: $*" >&2
    exit 1
}
cleanup() {
    # SIGTERM: nspawn powers the container off and waits for it; then nothing of it may be left (a container whose
    # nspawn is killed outright keeps running, holding the services' ports).
    if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
        kill -TERM "$nspawn_pid" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$nspawn_pid" 2>/dev/null || true
    fi
    [ -z "${leader:-}" ] || kill -KILL "$leader" 2>/dev/null || true
    [ -z "$simulator_pid" ] || kill "$simulator_pid" 2>/dev/null || true
    pg_stop "$scratch/postgres"
    rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "a Debian bookworm root with systemd (debootstrap, kept in .local/nspawn-bookworm)"
if [ ! -x "$cache/usr/lib/systemd/systemd" ] || [ ! -x "$cache/usr/bin/pg_dump" ]; then
    rm -rf "$cache.new"
    mkdir -p "$(dirname "$cache")"
    debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,ca-certificates,postgresql-client bookworm "$cache.new" http://deb.debian.org/debian \
        >"$scratch/debootstrap.log" 2>&1 || { tail -n 20 "$scratch/debootstrap.log" >&2; die "debootstrap failed"; }
    mv "$cache.new" "$cache"
fi
cp -a "$cache" "$root"

step "the release, installed in the root from its tarball with pushchat-release (no Swift in there)"
tarball=$(ls -1t dist/pushchat-*.tar.gz 2>/dev/null | head -n 1 || true)
if [ -z "$tarball" ]; then
    make dist >"$scratch/dist.log" 2>&1 || { tail -n 20 "$scratch/dist.log" >&2; die "make dist"; }
    tarball=$(ls -1t dist/pushchat-*.tar.gz | head -n 1)
fi
name=$(basename "$tarball" .tar.gz)
cp "$tarball" "$root/root/"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }
in_root sh -c "cd /root && tar -xzf $name.tar.gz && $name/bin/pushchat-release install" >"$scratch/install.log" 2>&1 \
    || { cat "$scratch/install.log" >&2; die "pushchat-release install in the root"; }
[ -x "$root/opt/pushchat/current/bin/pushchat-push" ] || die "pushchat-release did not install the release in the root"
in_root sh -c 'command -v swift' >/dev/null && die "the root has Swift"
in_root useradd --system --home /opt/pushchat --shell /usr/sbin/nologin pushchat
in_root useradd --system --home /opt/pushchat --shell /usr/sbin/nologin pushchat-api
# The backup runs pg_dump as postgres, the database's own user on a database server: here the database is on the
# host's loopback, reached through a drop-in (PGHOST=, PGPORT=), as an operator whose database is elsewhere would.
in_root useradd --system --home /var/lib/postgresql --shell /bin/sh postgres

step "PostgreSQL (TLS) and the simulator on this machine's loopback"
pg_start "$scratch/postgres" tls >/dev/null
pg_create_database "$PG_PORT" pushchat
psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qc "CREATE ROLE pushchat_owner; CREATE ROLE pushchat LOGIN PASSWORD 'unit-test'" >/dev/null
psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d postgres -qc "ALTER DATABASE pushchat OWNER TO pushchat_owner" >/dev/null
release=$root/opt/pushchat/current
(cd "$release" && PUSHCHAT_DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/pushchat" bin/pushchat-api migrate production --role pushchat_owner) \
    >"$scratch/migrate.log" 2>&1 || { cat "$scratch/migrate.log" >&2; die "migrate"; }
psql -h 127.0.0.1 -p "$PG_PORT" -U postgres -d pushchat -v ON_ERROR_STOP=1 -qf "$release/deploy/grants.sql" >/dev/null || die "grants"
certs=$scratch/certs
PUSHCHAT_DEV_PASSPHRASE=systemd-test deploy/dev-certs.sh "$certs" >/dev/null
http2_port=$(pg_free_port)
simulator=$(make -s --no-print-directory release-bin-path)/pushchat-apns-sim
[ -x "$simulator" ] || die "the simulator is not built ($simulator): make dist builds it"
"$simulator" --certs "$certs" --gateway-port 0 --feedback-port 0 --http2-port "$http2_port" --no-status \
    --topic com.example.PushChat --record "$scratch/record.jsonl" >"$scratch/simulator.log" 2>&1 &
simulator_pid=$!

step "/etc/pushchat, the units copied and enabled as the guide's §1 and §7 do"
etc=$root/etc/pushchat
install -d -m 755 "$etc"
install -m 644 "$release/config/pushchat.json" "$etc/pushchat.json"
install -m 640 -g "$(in_root id -g pushchat)" "$certs/AuthKey_DEVKEY0001.p8" "$etc/"
install -m 644 "$certs/ca.pem" "$etc/apns-ca.pem"
{
    echo "PUSHCHAT_DATABASE_URL=postgres://pushchat:unit-test@127.0.0.1:$PG_PORT/pushchat"
    echo "PUSHCHAT_APNS_TOPIC=com.example.PushChat"
    echo "PUSHCHAT_APNS_HOST=127.0.0.1:$http2_port"
    echo "PUSHCHAT_APNS_CA_FILE=/etc/pushchat/apns-ca.pem"
} >"$etc/pushchat.env"
{
    echo "PUSHCHAT_APNS_KEY_FILE=/etc/pushchat/AuthKey_DEVKEY0001.p8"
    echo "PUSHCHAT_APNS_TEAM_ID=DEVTEAM001"
} >"$etc/apns.env"
chgrp "$(in_root id -g pushchat)" "$etc/pushchat.env" "$etc/apns.env"
chmod 640 "$etc/pushchat.env" "$etc/apns.env"
install -d -m 755 "$root/var/lib/prometheus/node-exporter"
chgrp "$(in_root id -g pushchat)" "$root/var/lib/prometheus/node-exporter"
chmod 775 "$root/var/lib/prometheus/node-exporter"
cp "$release"/deploy/systemd/pushchat-*.service "$release"/deploy/systemd/pushchat-*.timer "$root/etc/systemd/system/"
in_root systemctl enable pushchat-api pushchat-push pushchat-feedback.timer pushchat-prune.timer pushchat-backup.timer >"$scratch/enable.log" 2>&1 \
    || { cat "$scratch/enable.log" >&2; die "systemctl enable"; }
install -d -m 700 "$root/var/backups/pushchat"
install -d "$root/etc/systemd/system/pushchat-backup.service.d"
printf '[Service]\nEnvironment=PGHOST=127.0.0.1 PGPORT=%s PGUSER=postgres PGSSLMODE=require\n' "$PG_PORT" \
    >"$root/etc/systemd/system/pushchat-backup.service.d/database.conf"
# The prune timer fires soon after boot as well as hourly: the test waits for one run.
install -d "$root/etc/systemd/system/pushchat-prune.timer.d"
printf '[Timer]\nOnActiveSec=5s\nAccuracySec=1s\nRandomizedDelaySec=0\n' >"$root/etc/systemd/system/pushchat-prune.timer.d/soon.conf"
# No login prompts or network setup in the container: it shares this machine's network.
in_root systemctl mask console-getty.service getty@tty1.service systemd-networkd.service systemd-resolved.service >/dev/null 2>&1 || true

step "boot (systemd-nspawn --boot, this machine's network)"
systemd-nspawn -D "$root" --boot --register=no --keep-unit --machine="pushchat-test-$$" >"$scratch/console.log" 2>&1 </dev/null &
nspawn_pid=$!
leader=""
for _ in $(seq 1 100); do
    # The container's PID 1: a systemd whose parent (or grandparent) is systemd-nspawn.
    for pid in $(pgrep -x systemd || true); do
        parent=$(ps -o ppid= -p "$pid" | tr -d ' ')
        grandparent=$(ps -o ppid= -p "$parent" 2>/dev/null | tr -d ' ')
        if [ "$parent" = "$nspawn_pid" ] || [ "$grandparent" = "$nspawn_pid" ]; then leader=$pid; break 2; fi
    done
    sleep 0.2
done
[ -n "$leader" ] || die "the container's systemd did not start"
in_container() { nsenter --target "$leader" --mount --uts --ipc --pid -- /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
# `systemctl is-system-running --wait` fails at once (no output) while the container's systemd has not yet opened
# its private socket, early in a boot on a loaded machine: ask again until it answers, within 90 s in all.
state=""
asks=0
boot_deadline=$(($(date +%s) + 90))
while [ -z "$state" ] && [ "$(date +%s)" -lt "$boot_deadline" ]; do
    state=$(timeout $((boot_deadline - $(date +%s) + 1)) nsenter --target "$leader" --mount --uts --ipc --pid -- \
        systemctl is-system-running --wait 2>"$scratch/is-running.err" || true)
    asks=$((asks + 1))
    [ -n "$state" ] || sleep 0.5
done
echo "    the container's systemd: $state$([ "$asks" -eq 1 ] || echo " (asked $asks times: $(tail -n 1 "$scratch/is-running.err"))")"
case "$state" in
    running | degraded) ;;
    *) die "the container did not finish booting within 90 s (${state:-no answer: $(tail -n 1 "$scratch/is-running.err")})" ;;
esac

step "1. the services, enabled and started by systemd: active, ready, a message delivered"
for unit in pushchat-api pushchat-push; do
    for _ in $(seq 1 100); do [ "$(in_container systemctl is-active "$unit" || true)" = active ] && break; sleep 0.2; done
    [ "$(in_container systemctl is-active "$unit" || true)" = active ] || die "$unit is not active: $(in_container systemctl status --no-pager "$unit" | tail -n 5)"
done
for port in 44447 44448; do
    for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || die "port $port is not ready"
done
post() { curl -sS -o /dev/null -w '%{http_code}' http://127.0.0.1:44447/api.php "$@"; }
token=$(printf 'd7%.0s' {1..32})
[ "$(post --data-urlencode cmd=join --data-urlencode udid=1111111111111111111111111111111111111111 --data-urlencode "token=$token" --data-urlencode name=Ann --data-urlencode code=systemd)" = 200 ] || die "join Ann"
[ "$(post --data-urlencode cmd=join --data-urlencode udid=2222222222222222222222222222222222222222 --data-urlencode "token=$(printf 'd8%.0s' {1..32})" --data-urlencode name=Bob --data-urlencode code=systemd)" = 200 ] || die "join Bob"
[ "$(post --data-urlencode cmd=message --data-urlencode udid=2222222222222222222222222222222222222222 --data-urlencode 'text=Under systemd')" = 200 ] || die "message"
for _ in $(seq 1 100); do grep -q "$token" "$scratch/record.jsonl" 2>/dev/null && break; sleep 0.1; done
grep "$token" "$scratch/record.jsonl" | grep -q 'Bob: Under systemd' || die "the message did not arrive at the simulator"
grep -q 'Connection OK (HTTP/2)' <<<"$(in_container journalctl --no-pager -u pushchat-push)" || die "the journal has no line of pushchat-push"
[ "$(in_container systemctl show -p User --value pushchat-api)" = pushchat-api ] || die "the API does not run as pushchat-api"
echo "    pushchat-api and pushchat-push active under systemd's sandbox; the message arrived"

step "2. a timer fires: pushchat-prune.timer starts pushchat-prune.service, which succeeds"
for _ in $(seq 1 150); do [ -s "$root/var/lib/prometheus/node-exporter/pushchat_prune.prom" ] && break; sleep 0.2; done
[ -s "$root/var/lib/prometheus/node-exporter/pushchat_prune.prom" ] || die "the prune timer did not run its service within 30 s"
for _ in $(seq 1 50); do [ "$(in_container systemctl show -p Result --value pushchat-prune.service)" = success ] && break; sleep 0.2; done
[ "$(in_container systemctl show -p ExecMainStatus --value pushchat-prune.service)" = 0 ] || die "pushchat-prune.service did not exit 0"
grep -q '^pushchat_prune_success 1' "$root/var/lib/prometheus/node-exporter/pushchat_prune.prom" || die "the prune run does not say success"
echo "    pushchat-prune.timer fired; the service exited 0 and wrote its metrics file"

step "2b. the nightly backup's service, under its hardening (root without capabilities but to change user)"
in_container systemctl start pushchat-backup || die "pushchat-backup failed: $(in_container journalctl --no-pager -u pushchat-backup | tail -n 5)"
[ "$(in_container systemctl show -p Result --value pushchat-backup)" = success ] || die "pushchat-backup did not succeed"
ls "$root/var/backups/pushchat"/pushchat-*.dump >/dev/null 2>&1 || die "pushchat-backup wrote no dump"
grep -q 'verified with pg_restore --list' <<<"$(in_container journalctl --no-pager -u pushchat-backup)" || die "the backup did not verify its dump"
grep -q '^pushchat_backup_last_success_timestamp_seconds ' "$root/var/lib/prometheus/node-exporter/pushchat_backup.prom" || die "no backup metric"
echo "    pushchat-backup dumped, verified and tarred /etc/pushchat; its metric is written"

step "3. exit 78 (a configuration error) is not restarted; a crash is"
install -d "$root/etc/systemd/system/pushchat-push.service.d"
printf '[Service]\nEnvironment=PUSHCHAT_PUSH_STATUS_PORT=not-a-port\n' >"$root/etc/systemd/system/pushchat-push.service.d/broken.conf"
in_container systemctl daemon-reload
in_container systemctl restart pushchat-push || true
sleep 6  # RestartSec=2: a restart would have happened by now
status=$(in_container systemctl show -p ExecMainStatus --value pushchat-push)
restarts=$(in_container systemctl show -p NRestarts --value pushchat-push)
active=$(in_container systemctl is-active pushchat-push || true)
[ "$status" = 78 ] && [ "$restarts" = 0 ] && [ "$active" = failed ] \
    || die "after exit 78: status $status, $restarts restarts, $active (expected 78, 0, failed)"
grep -q 'PUSHCHAT_PUSH_STATUS_PORT: expected a whole number' <<<"$(in_container journalctl --no-pager -u pushchat-push)" || die "the journal does not name the setting"
rm "$root/etc/systemd/system/pushchat-push.service.d/broken.conf"
in_container systemctl daemon-reload
in_container systemctl reset-failed pushchat-push
in_container systemctl start pushchat-push
main=$(in_container systemctl show -p MainPID --value pushchat-push)
in_container systemctl kill -s SIGKILL pushchat-push
for _ in $(seq 1 50); do
    [ "$(in_container systemctl show -p NRestarts --value pushchat-push)" = 1 ] && [ "$(in_container systemctl is-active pushchat-push || true)" = active ] && break
    sleep 0.2
done
[ "$(in_container systemctl show -p NRestarts --value pushchat-push)" = 1 ] || die "a killed pushchat-push was not restarted"
[ "$(in_container systemctl show -p MainPID --value pushchat-push)" != "$main" ] || die "pushchat-push runs the same process"
echo "    exit 78: failed, 0 restarts; SIGKILL: restarted after RestartSec="

step "4. systemctl stop: each service ends with success"
for unit in pushchat-push pushchat-api; do
    in_container systemctl stop "$unit"
    [ "$(in_container systemctl show -p Result --value "$unit")" = success ] || die "$unit did not stop cleanly: $(in_container systemctl show -p Result --value "$unit")"
done

step "5. systemd-analyze security: the scores the guide states"
missing=()
for unit in pushchat-api pushchat-push pushchat-feedback pushchat-prune pushchat-backup; do
    line=$(in_container systemd-analyze security --no-pager "$unit.service" | grep 'Overall exposure level' || true)
    score=$(sed -n 's/.*: \([0-9.]*\) \([A-Z]*\).*/\1 \2/p' <<<"$line")
    [ -n "$score" ] || die "systemd-analyze security $unit gave no score: $line"
    echo "    $unit: $score"
    grep -q "^ *| \`$unit\` | ${score% *} | ${score#* } |" deploy/README.md || missing+=("$unit: $score")
done
[ ${#missing[@]} -eq 0 ] || die "deploy/README.md (§7) does not state these exposure scores: ${missing[*]}"

echo "==> systemd-test: passed in $(($(date +%s) - start)) s"
