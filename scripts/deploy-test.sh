#!/usr/bin/env bash
# The deployment test: deploy/README.md followed to the letter on this machine, into a scratch folder, the way an
# operator deploys on Debian, with the local APNs simulator standing in for Apple.
#
#   1. the guide's command blocks marked <!-- deploy-test: NAME --> run as written (sudo -u U → runuser, paths under
#      the scratch folder; systemctl answered by the test): make dist, the tarball checked and installed with its
#      pushchat-release on a PATH without Swift (a damaged copy refused), the service user, /etc/pushchat, the key,
#      the database role and database (createuser --pwprompt, answered), migrate, the metrics folder;
#   2. a stock Debian PostgreSQL cluster (pg_createcluster: ssl = on with the self-signed "snakeoil" certificate,
#      peer and scram-sha-256 authentication);
#   3. the environment file made from the example with only its CHANGE-ME values filled (a password that needs
#      percent-encoding), the test cluster's port, and the simulator's host and CA in place of Apple;
#   4. each unit's ExecStart run as its User= with its Environment=/EnvironmentFile= read from the unit files
#      (scripts/lib/unit.py: read-only system but for ReadWritePaths=, private /tmp, no capabilities);
#   5. two joins and a message arrive at the simulator over HTTP/2; a third device Apple calls unregistered (410)
#      is deleted by the feedback job, run as its timer runs it; the prune job runs; the metrics file appears;
#   6. secrets: the API runs as pushchat-api, which can read neither the APNs key nor apns.env, and its environment
#      holds no APNs credential;
#   7. the guide's PgBouncer block (Debian's pgbouncer, transaction pooling, a pool of 2 server connections): three
#      API processes (drop-ins for their ports) and the daemon through it, chat traffic delivered once each;
#   8. Debian's nginx with deploy/nginx-pushchat.conf in front of the API: the app's API, /v1 and /readyz through it;
#   9. the guide's backup block (the timer's service: a verified dump in a root-only folder, old backups deleted, a
#      metric), its drill (the dump restored beside, counted, nothing sent), and its restore block into a second
#      cluster (PgBouncer's userlist rebuilt): what was pending in the dump is sent, once;
#  9b. the guide's §17 on two clusters standing in for db1 and db2: the standby copied with pg_basebackup -R and
#      streaming synchronously, the services on the guide's multi-host URL, the primary crashed (-m immediate) and the
#      standby promoted with the guide's block; the API answers 200 within 10 s of the promotion without a restart,
#      every message once, and the feedback job runs on the same URL;
#  10. promtool on deploy/prometheus.yml and deploy/alerts.yml, whose metrics the programs exported during the test,
#      and the rules' unit tests (deploy/alerts-test.yml, one or more per rule);
#  11. systemd-analyze verify on the units (required: scripts/test.sh installs Debian's systemd when missing).
#
# Needs root (it creates the users pushchat and pushchat-api and a PostgreSQL cluster; all are removed at the end
# unless they existed). Run by `scripts/test.sh` and CI; takes a few minutes plus the release build.
#
# The upgrade (§16) goes from the commit before the newest migration to this one with pushchat-release under chat
# traffic, with a lower bound on the messages accepted before, during and after it; a release whose migration fails
# stops before the switch (the running one keeps serving, nothing restarts) and switching to it is refused; the
# rollback runs the target's own schema check and puts its units back; then forward again and migrate --contract.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
. scripts/lib/postgres.sh

if [ "$(id -u)" -ne 0 ]; then
    echo "deploy-test: needs root (it creates the service user and a PostgreSQL cluster, as the guide does)" >&2
    exit 1
fi

# Keep the scratch folder out of /tmp, /home and /root: the units hide those (PrivateTmp=, ProtectHome=).
scratch=$(mktemp -d /opt/pushchat-deploy-test.XXXXXX)
chmod 755 "$scratch"
prefix=$scratch/opt/pushchat
etc=$scratch/etc/pushchat
metrics=$scratch/var/lib/prometheus/node-exporter
maps=(--map "/opt/pushchat=$prefix" --map "/etc/pushchat=$etc" --map "/var/lib/prometheus/node-exporter=$metrics"
    --map "/var/backups/pushchat=$scratch/backups")
pg_version=$(basename "$(dirname "$(pg_bindir)")")
cluster=deploytest$$
created_users=()
pids=()
receiver_pid=""

step() { echo "==> deploy-test [${start:+$(($(date +%s) - start)) s}]: $*"; }
# The test's own standard error, for die: a failure inside a guide line's run (whose output goes to guide.log) is
# still reported where the test's output goes.
exec 8>&2
die() {
    echo "deploy-test: FAILED: $*" >&8
    for log in "$scratch"/*.log; do [ -f "$log" ] && { echo "--- $log" >&8; tail -n 30 "$log" >&8; }; done
    # Again after the logs: a CI that keeps only the end of the output still says what failed.
    echo "deploy-test: FAILED: $*" >&8
    exit 1
}

cleanup() {
    local pid
    [ -z "$receiver_pid" ] || kill "$receiver_pid" 2>/dev/null || true
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    # SIGINT: PgBouncer's fast shutdown (SIGTERM waits for its clients), as Debian's unit stops it.
    [ -z "$bouncer_pid" ] || kill -INT "$bouncer_pid" 2>/dev/null || true
    [ -z "$guide_job" ] || kill -- -"$guide_job" 2>/dev/null || true
    pg_dropcluster --stop "$pg_version" "$cluster" >/dev/null 2>&1 || true
    pg_dropcluster --stop "$pg_version" "${cluster}r" >/dev/null 2>&1 || true
    pg_dropcluster --stop "$pg_version" "${cluster}s" >/dev/null 2>&1 || true
    for user in "${created_users[@]}"; do userdel "$user" 2>/dev/null; done
    rm -rf "$scratch"
}
trap cleanup EXIT
[ -n "${PUSHCHAT_DEPLOY_TEST_KEEP:-}" ] && trap - EXIT
trap 'exit 130' INT TERM

# The lines of the guide's block NAME.
guide_block() {
    awk -v marker="<!-- deploy-test: $1 -->" '
        $0 == marker { found = 1; next }
        found && /^```sh/ { inside = 1; next }
        inside && /^```/ { exit }
        inside { print }
    ' deploy/README.md
}

# Runs the guide's block NAME line by line, as written but for the scratch paths, in DIR with INPUT on standard
# input and without a terminal (setsid), so prompts read standard input.
run_guide_block() {
    local block=$1 dir=$2 input=$3 line command path
    local lines
    lines=$(guide_block "$block")
    [ -n "$lines" ] || die "deploy/README.md has no block marked deploy-test: $block"
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        command=$(printf '%s\n' "$line" | sed -e "s#/opt/pushchat#$prefix#g" -e "s#/etc/pushchat#$etc#g" \
            -e "s#/var/lib/prometheus/node-exporter#$metrics#g" -e "s#localhost:5432/#localhost:${pg_port:-5432}/#g" \
            -e "s#/etc/pgbouncer#$scratch/etc/pgbouncer#g" -e "s#ABC123DEFG#DEVKEY0001#g" -e "s#DEF123GHIJ#DEVTEAM001#g" -e "s#NEWKEY1234#BETAKEY001#g" \
            -e "s#NEW-PASSWORD-PERCENT-ENCODED#${new_password_encoded:-}#g" \
            -e "s#/var/backups/pushchat#$scratch/backups#g" -e "s#/etc/systemd/system/#$scratch/etc/systemd/system/#g" \
            -e "s#/etc/nginx#$scratch/etc/nginx#g" -e "s#/var/www/letsencrypt#$scratch/www/letsencrypt#g" \
            -e "s#/etc/nftables#$scratch/etc/nftables#g" \
            -e "s#https://hooks.example.com/pushchat#http://127.0.0.1:${webhook_port:-9}/pushchat#g" \
            -e "s#env PUSHCHAT_DATABASE_URL=\([^ ]*\) bin/pushchat-api webhooks #env PUSHCHAT_WEBHOOK_PRIVATE_HOSTS=127.0.0.1:${webhook_port:-9} PUSHCHAT_DATABASE_URL=\1 bin/pushchat-api webhooks #g" \
            -e "s#/etc/postgresql/15/main/#/etc/postgresql/$pg_version/${ha_cluster:-}/#g" \
            -e "s#/var/lib/postgresql/15/main#/var/lib/postgresql/$pg_version/${ha_cluster:-}#g" \
            -e "s#pg_ctlcluster 15 main #pg_ctlcluster $pg_version ${ha_cluster:-} #g" -e "s#-h db1 #-h localhost -p ${ha_primary_port:-} #g" \
            -e "s#10.0.0.2/32#127.0.0.1/32#g" -e "s#listen_addresses = '\*'#listen_addresses = 'localhost'#g" \
            -e "s#20261101120000-abc1234#${rollback_to:-}#g" -e "s#pushchat-20261201090000-def5678#pushchat-${release_version:-}#g" \
            -e 's#sudo -u \([a-z_-]*\) #runuser -u \1 -- #g' -e 's#sudo ##g')
        # §17's blocks name Debian's cluster main on db1 and db2: here two clusters of the test's own stand in.
        case "$command" in
        *"/var/lib/postgresql/"* | *"pg_ctlcluster "*)
            [ -n "${ha_cluster:-}" ] && [[ "$command" == *"$ha_cluster"* ]] || die "a line for another cluster than the test's: $command"
            ;;
        esac
        case "$command" in
        "systemctl stop postgresql" | "systemctl start postgresql" | "systemctl restart postgresql")
            pg_ctlcluster "$pg_version" "$ha_cluster" "$(cut -d' ' -f2 <<<"$command")" >>"$scratch/postgres.log" 2>&1 \
                || die "the guide's line failed: $line (pg_ctlcluster $pg_version $ha_cluster)"
            echo "    (guide) $line   [pg_ctlcluster $pg_version $ha_cluster]"
            continue
            ;;
        "apt-get install "*)
            # Installed by scripts/test.sh (pg_ensure_installed); the test does not reinstall packages.
            for package in ${command#apt-get install }; do dpkg -s "$package" >/dev/null 2>&1 || die "$package is not installed"; done
            echo "    (guide) $line   [installed]"
            continue
            ;;
        *"useradd "*)
            local user=${command##* }
            if id -u "$user" >/dev/null 2>&1; then
                echo "    (guide) $line   [the user exists]"
                continue
            fi
            created_users+=("$user")
            ;;
        "systemctl daemon-reload")
            echo "    (guide) $line   [no systemd: the units are read at each start]"
            continue
            ;;
        "systemctl restart pushchat-"*)
            for name in ${command#systemctl restart }; do restart_unit "$name"; done
            echo "    (guide) $line   [restarted from the unit files]"
            continue
            ;;
        "nginx -t")
            adapt_nginx_sites
            nginx -t -c "$scratch/etc/nginx/nginx.conf" >>"$scratch/nginx.log" 2>&1 || die "nginx -t: $(tail -n 3 "$scratch/nginx.log")"
            echo "    (guide) $line   [the scratch copy of /etc/nginx]"
            continue
            ;;
        "systemctl reload nginx")
            reload_nginx
            echo "    (guide) $line   [nginx started or reloaded from the scratch copy]"
            continue
            ;;
        "certbot certonly "*)
            # A stand-in for Let's Encrypt: the development certificate where certbot puts the host's.
            install -d "$scratch/etc/letsencrypt/live/push.example.com"
            cp "$certs/server.pem" "$scratch/etc/letsencrypt/live/push.example.com/fullchain.pem"
            cp "$certs/server-key.pem" "$scratch/etc/letsencrypt/live/push.example.com/privkey.pem"
            echo "    (guide) $line   [the development certificate in certbot's place]"
            continue
            ;;
        "nft -c -f "*)
            unshare -n nft -c -f "${command#nft -c -f }" >>"$scratch/guide.log" 2>&1 || die "nft -c: $(tail -n 3 "$scratch/guide.log")"
            echo "    (guide) $line   [checked]"
            continue
            ;;
        "systemctl enable --now nftables")
            # Loaded in a network namespace of its own: this machine's own firewall is not touched.
            unshare -n sh -c "nft -f '$scratch/etc/nftables.conf' && nft list ruleset" >"$scratch/nftables.log" 2>&1 \
                || die "nft -f: $(tail -n 3 "$scratch/nftables.log")"
            echo "    (guide) $line   [loaded in a private network namespace]"
            continue
            ;;
        "systemctl reload pgbouncer")
            kill -HUP "$bouncer_pid" || die "systemctl reload pgbouncer: PgBouncer is not running"
            sleep 0.5
            echo "    (guide) $line   [SIGHUP: PgBouncer reads its files again]"
            continue
            ;;
        "systemctl restart pgbouncer")
            # No systemd here: PgBouncer as Debian's unit runs it (User=postgres, the ini as its argument).
            start_pgbouncer
            echo "    (guide) $line   [pgbouncer started as postgres]"
            continue
            ;;
        esac
        echo "    (guide) $line"
        # The build machine's block has the toolchain; every other runs on the server's PATH, which has none.
        if [ "$block" = dist ]; then path=$PATH; else path=$server_path; fi
        run_served "$dir" "$input" "$command" "$path" >>"$scratch/guide.log" 2>&1 \
            || die "the guide's line failed: $line (see guide.log)"
    done <<<"$lines"
}

# nginx as the guide installs it, in a scratch copy of Debian's /etc/nginx: the sites' ports moved to free loopback
# ports, certbot's paths to the scratch folder (the stand-in above put the certificate there).
nginx_pid=""
adapt_nginx_sites() {
    local file
    for file in "$scratch/etc/nginx/sites-available"/pushchat*; do
        [ -f "$file" ] || continue
        sed -i -e "s#listen 80;#listen 127.0.0.1:$nginx_http_port;#" -e "s#listen \[::\]:80;#listen [::1]:$nginx_http_port;#" \
            -e "s#listen 443 ssl;#listen 127.0.0.1:$nginx_port ssl;#" -e "s#listen \[::\]:443 ssl;#listen [::1]:$nginx_port ssl;#" \
            -e "s# /etc/letsencrypt# $scratch/etc/letsencrypt#g" -e "s# /var/www/letsencrypt# $scratch/www/letsencrypt#g" "$file"
    done
}
reload_nginx() {
    adapt_nginx_sites
    if [ -n "$nginx_pid" ]; then
        kill -HUP "$nginx_pid"
        sleep 0.5
    else
        nginx -c "$scratch/etc/nginx/nginx.conf" -g 'daemon off;' >>"$scratch/nginx.log" 2>&1 &
        nginx_pid=$!
        pids+=("$nginx_pid")
    fi
}

# The server's PATH: no Swift (the toolchain lives under /opt/swift), the test's systemctl first.
server_path=$scratch/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
! env PATH="$server_path" sh -c 'command -v swift' >/dev/null || die "swift is on the server's PATH ($server_path)"
# systemctl, as the programs the guide runs call it (pushchat-release): it asks the test, through a FIFO, to do what
# systemd would, and waits for the answer on a FIFO of its own. (One shared answer FIFO raced: a writer that had not
# yet closed its end let the next call's open succeed at once, and that call read end-of-file instead of its answer.)
mkdir -p "$scratch/bin"
systemctl_fifo=$scratch/systemctl.fifo
mkfifo "$systemctl_fifo"
exec 7<>"$systemctl_fifo"
cat >"$scratch/bin/systemctl" <<SHIM
#!/bin/sh
ack=\$(mktemp -u "$scratch/systemctl.ack.XXXXXX") && mkfifo -m 600 "\$ack" || exit 1
trap 'rm -f "\$ack"' EXIT
printf '%s %s\n' "\$ack" "\$*" >"$systemctl_fifo"
read -r answer <"\$ack"
[ "\$answer" = ok ] || { echo "systemctl: \${answer:-no answer}" >&2; exit 1; }
SHIM
chmod 755 "$scratch/bin/systemctl"
guide_job=""

# Runs COMMAND with bash in DIR with INPUT on standard input, without a terminal (setsid: prompts read standard
# input), on PATH, with pushchat-release's settings pointing at the scratch folder, doing what systemd would for
# each systemctl it calls. Returns the command's status.
run_served() {
    local dir=$1 input=$2 command=$3 path=$4 request
    (cd "$dir" && setsid -w env PATH="$path" PUSHCHAT_PREFIX="$prefix" PUSHCHAT_ETC="$etc" \
        PUSHCHAT_UNITS_DIR="$scratch/etc/systemd/system" \
        PUSHCHAT_MIGRATE_URL="postgres://postgres@localhost:${pg_port:-5432}/pushchat?host=/run/postgresql" \
        bash -c "$command" <"$input") &
    guide_job=$!
    # A read that times out mid-line keeps what it read (bash saves partial input): the rest comes with the next.
    local partial="" status
    while :; do
        if read -r -t 0.2 -u 7 request; then
            request=$partial$request partial=""
            serve_systemctl "${request#* }" "${request%% *}"
            continue
        else
            status=$?
            [ "$status" -gt 128 ] && partial+=$request
        fi
        kill -0 "$guide_job" 2>/dev/null || break
    done
    wait "$guide_job"
}

# Does what systemd would for `systemctl $1` and answers "ok" or the reason on the caller's FIFO $2.
serve_systemctl() {
    local answer=ok name
    case "$1" in
    daemon-reload) echo "    (systemctl) daemon-reload   [no systemd: the units are read at each start]" ;;
    "enable --now "*.timer) echo "    (systemctl) $1   [no systemd: the test starts the timer's service itself]" ;;
    "start "*)
        # A oneshot, as the timer would start it: the unit in /etc/systemd/system with its drop-ins, in the foreground.
        for name in ${1#start }; do
            local file=$scratch/etc/systemd/system/$name.service dropins=()
            for conf in "$file.d"/*.conf; do [ -f "$conf" ] && dropins+=(--dropin "$conf"); done
            python3 "$repo/scripts/lib/unit.py" "${maps[@]}" "${dropins[@]}" "$file" >"$scratch/$name.log" 2>&1 \
                || answer="$name failed with status $? (see $name.log)"
        done
        echo "    (systemctl) $1   [run from the unit file: $answer]"
        ;;
    "restart "*)
        for name in ${1#restart }; do restart_unit "$name"; done
        echo "    (systemctl) $1   [restarted from the unit files]"
        ;;
    *) answer="the deployment test does not do: systemctl $1" ;;
    esac
    [ -p "$2" ] || die "systemctl $1: the call's answer FIFO $2 is gone"
    timeout 10 sh -c 'echo "$1" >"$2"' - "$answer" "$2" || die "systemctl $1 did not take its answer"
}

# The programs need nothing beyond the C library's own libraries (make dist checks it on the build machine too).
only_libc() {
    ldd "$1" | awk '{ print $1 }' | grep -Ev '^(linux-vdso\.so|/lib64/ld-linux|/lib/ld-linux|lib(c|m|dl|rt|pthread|util|gcc_s|stdc\+\+|z)\.so)' && return 1
    return 0
}

free_port() { pg_free_port; }

# The chat messages whose text starts with WORD: EXPECTED rows queued, every one sent (waits up to 20 s), and
# EXPECTED notifications at the simulator, no (token, payload) twice. WHERE says where, for the messages.
delivered_once() {
    local word=$1 expected=$2 where=$3 queued sent arrived distinct
    for _ in $(seq 1 200); do
        [ "$(db "SELECT count(*) FROM push_deliveries WHERE time_sent IS NOT NULL AND payload LIKE '%: $word %'")" = "$expected" ] && break
        sleep 0.1
    done
    queued=$(db "SELECT count(*) FROM push_deliveries WHERE payload LIKE '%: $word %'")
    sent=$(db "SELECT count(*) FROM push_deliveries WHERE time_sent IS NOT NULL AND payload LIKE '%: $word %'")
    [ "$queued" = "$expected" ] || die "$queued rows queued $where, not $expected"
    [ "$sent" = "$expected" ] || die "$sent of $expected rows queued $where were sent"
    read -r arrived distinct < <(python3 - "$scratch/record.jsonl" ": $word " <<'EOF'
import json, sys
pairs = [(r["token"], r["payload"]) for r in map(json.loads, open(sys.argv[1])) if sys.argv[2] in r["payload"]]
print(len(pairs), len(set(pairs)))
EOF
)
    [ "$arrived" = "$expected" ] || die "$arrived notifications arrived $where, not $expected"
    [ "$distinct" = "$expected" ] || die "$distinct distinct (token, message) pairs arrived $where, not $expected (one sent twice?)"
}

# PgBouncer with the guide's ini at test ports and paths, a pool of 2 (a small PostgreSQL), as Debian's unit runs it.
bouncer_pid=""
start_pgbouncer() {
    local ini=$scratch/etc/pgbouncer/pgbouncer.ini
    bouncer_port=$(free_port)
    sed -i -e "s#^listen_port = 6432#listen_port = $bouncer_port#" -e "s#port=5432 #port=$pg_port #" \
        -e "s#/etc/pgbouncer#$scratch/etc/pgbouncer#g" -e "s#^default_pool_size = .*#default_pool_size = 2#" "$ini"
    grep -q "^listen_port = $bouncer_port" "$ini" || die "the guide's pgbouncer.ini has no listen_port = 6432"
    setpriv --reuid=postgres --regid=postgres --init-groups /usr/sbin/pgbouncer "$ini" >"$scratch/pgbouncer.log" 2>&1 &
    bouncer_pid=$!
}

start=$(date +%s)

step "the release (the guide's §1): make dist on the build machine, installed from the tarball on a PATH without Swift"
run_guide_block dist "$repo" /dev/null
tarball=$(ls -1t "$repo"/dist/pushchat-*.tar.gz | head -n 1)
release_version=$(basename "$tarball" .tar.gz)
release_version=${release_version#pushchat-}
echo "    the release: $release_version ($(du -h "$tarball" | cut -f1))"
# The server's folder the two files were copied to.
server=$scratch/server
mkdir -p "$server"
cp "$tarball" "$tarball.sha256" "$server/"
# A damaged copy is refused before anything is installed.
mkdir -p "$scratch/damaged"
tar -xzf "$tarball" -C "$scratch/damaged"
printf 'x' >>"$scratch/damaged/pushchat-$release_version/bin/pushchat-push"
if run_served "$scratch/damaged" /dev/null "pushchat-$release_version/bin/pushchat-release install" "$server_path" >"$scratch/damaged.log" 2>&1; then
    die "pushchat-release installed a release whose pushchat-push does not match SHA256SUMS"
fi
grep -q "does not match its SHA256SUMS" "$scratch/damaged.log" || die "the damaged release was refused without saying why: $(cat "$scratch/damaged.log")"
[ ! -e "$prefix/releases/$release_version" ] || die "the damaged release was copied under releases/"
run_guide_block install "$server" /dev/null
[ "$(readlink "$prefix/current")" = "releases/$release_version" ] || die "pushchat-release install did not point current at releases/$release_version"
for program in pushchat-api pushchat-push pushchat-feedback pushchat-release; do
    [ -x "$prefix/current/bin/$program" ] || die "pushchat-release install did not install bin/$program"
done
for program in pushchat-api pushchat-push pushchat-feedback; do
    extra=$(only_libc "$prefix/current/bin/$program") || die "$program needs more than the C library: $extra"
done
(cd "$prefix/current" && sha256sum --check --quiet SHA256SUMS) || die "the installed release does not match its SHA256SUMS"
for file in pushchat.env apns.env; do
    [ "$(stat -c '%a %U %G' "$etc/$file")" = "640 root pushchat" ] || die "$file is not 0640 root:pushchat"
done
[ "$(stat -c '%a' "$etc/pushchat.json")" = 644 ] || die "pushchat.json is not 0644"

step "development certificates and the simulator standing in for Apple"
certs=$scratch/certs
# The simulator plays Google too, on this port: the development service account's token URI names it.
fcm_port=$(free_port)
PUSHCHAT_DEV_PASSPHRASE=deploy-test PUSHCHAT_DEV_FCM_PORT=$fcm_port deploy/dev-certs.sh "$certs" >/dev/null
keys=$scratch/keys
mkdir -p "$keys"
cp "$certs/AuthKey_DEVKEY0001.p8" "$keys/"
run_guide_block key "$keys" /dev/null
[ "$(stat -c '%a %U %G' "$etc/AuthKey_DEVKEY0001.p8")" = "640 root pushchat" ] || die "the key is not 0640 root:pushchat"
install -m 644 "$certs/ca.pem" "$etc/apns-ca.pem"
printf '%s\n' "$(printf 'ab%.0s' {1..32})" >"$scratch/unregistered.txt"
# A second key of the same Firebase service account (the rotation below): Google's side knows both.
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$scratch/fcm-key-2.pem" 2>/dev/null
python3 - "$certs/fcm-service-account.json" "$scratch/fcm-key-2.pem" "$keys/fcm-service-account-2.json" <<'EOF'
import json, sys
account = json.load(open(sys.argv[1]))
account["private_key"] = open(sys.argv[2]).read()
account["private_key_id"] = "2" * 40
json.dump(account, open(sys.argv[3], "w"), indent=2)
EOF
http2_port=$(free_port)
# The simulator's browsers' push service, and its status page (where a browser subscribes).
webpush_port=$(free_port)
status_port=$(free_port)
# The receiver of delivery events (the guide's webhook at hooks.example.com stands on loopback, listed as private).
webhook_port=$(free_port)
# Built by `make dist` beside the programs it packs.
simulator=$(make -s -C "$repo" --no-print-directory release-bin-path)/pushchat-apns-sim
[ -x "$simulator" ] || die "the simulator was not built by make dist ($simulator)"
# A copy runs: the upgrade below builds into the same folder while the simulator keeps running.
cp "$simulator" "$scratch/pushchat-apns-sim"
simulator=$scratch/pushchat-apns-sim
"$simulator" --certs "$certs" --gateway-port 0 --feedback-port 0 --http2-port "$http2_port" --status-port "$status_port" \
    --webpush-port "$webpush_port" \
    --topic com.example.PushChat --topic com.example.PushChat.beta --unregistered "$scratch/unregistered.txt" --record "$scratch/record.jsonl" \
    --topic com.example.PushChat.gamma --fcm-port "$fcm_port" --fcm-service-account "$certs/fcm-service-account.json" \
    --fcm-service-account "$keys/fcm-service-account-2.json" \
    >"$scratch/simulator.log" 2>&1 &
pids+=($!)

step "a stock Debian PostgreSQL cluster (ssl = on, self-signed certificate)"
if [ ! -s /etc/ssl/certs/ssl-cert-snakeoil.pem ]; then
    # What Debian's ssl-cert package does when it is installed; PostgreSQL's package then turns ssl on.
    make-ssl-cert generate-default-snakeoil
fi
pg_port=$(free_port)
pg_createcluster --port "$pg_port" "$pg_version" "$cluster" >"$scratch/postgres.log" 2>&1 || die "pg_createcluster failed"
pg_ctlcluster "$pg_version" "$cluster" start >>"$scratch/postgres.log" 2>&1 || die "the cluster did not start"
export PGPORT=$pg_port PGCLUSTER=$pg_version/$cluster
db() { runuser -u postgres -- psql -d pushchat -tAc "$1"; }
[ "$(runuser -u postgres -- psql -tAc 'SHOW ssl')" = on ] || die "the test cluster does not run with ssl = on"

step "the database roles and database (the guide's §2)"
password='Push#chat/s3cret@deploy'
printf '%s\n%s\n' "$password" "$password" >"$scratch/password-input"
run_guide_block database "$repo" "$scratch/password-input"

step "the environment files: the examples with their CHANGE-ME values filled"
encoded=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$password")
for env_file in "$etc/pushchat.env" "$etc/apns.env"; do
python3 - "$env_file" "$encoded" "$pg_port" "$etc" <<'EOF'
import sys
path, encoded, port, etc = sys.argv[1:]
values = {
    "PUSHCHAT_DATABASE_URL": lambda v: v.replace("CHANGE-ME", encoded).replace("@localhost:5432/", f"@localhost:{port}/"),
    "PUSHCHAT_APNS_TOPIC": lambda v: "com.example.PushChat",
    "PUSHCHAT_APNS_KEY_FILE": lambda v: v.replace("CHANGE-ME", "DEVKEY0001"),
    "PUSHCHAT_APNS_TEAM_ID": lambda v: "DEVTEAM001",
}
lines = []
for line in open(path).read().splitlines():
    if not line.startswith("#") and "CHANGE-ME" in line:
        key, value = line.split("=", 1)
        if key not in values:
            sys.exit(f"the example has a CHANGE-ME value the test does not know: {key}")
        line = f"{key}={values[key](value)}"
    # The scratch folder stands in for /etc/pushchat, as everywhere in this test.
    lines.append(line.replace("/etc/pushchat", etc))
open(path, "w").write("\n".join(lines) + "\n")
EOF
    grep -v '^#' "$env_file" | grep -q CHANGE-ME && die "a CHANGE-ME value is left in $env_file"
done
grep -q '^PUSHCHAT_APNS_KEY' "$etc/pushchat.env" && die "pushchat.env (read by the API's unit) names the APNs key"
# §1 again (an operator repeating it, an upgrade): the users and the filled-in files stay as they are.
filled=$(sha256sum "$etc/pushchat.env" "$etc/apns.env" "$etc/pushchat.json")
run_guide_block install "$server" /dev/null
[ "$(sha256sum "$etc/pushchat.env" "$etc/apns.env" "$etc/pushchat.json")" = "$filled" ] || die "running §1 again changed the settings"
{
    echo "# deploy-test: the local simulator stands in for Apple"
    echo "PUSHCHAT_APNS_HOST=127.0.0.1:$http2_port"
    echo "PUSHCHAT_WEBHOOK_PRIVATE_HOSTS=127.0.0.1:$webhook_port"
    echo "PUSHCHAT_APNS_CA_FILE=$etc/apns-ca.pem"
    echo "PUSHCHAT_FCM_HOST=127.0.0.1:$fcm_port"
    echo "PUSHCHAT_FCM_CA_FILE=$etc/apns-ca.pem"
    echo "PUSHCHAT_WEBPUSH_PRIVATE_HOSTS=127.0.0.1:$webpush_port"
    echo "PUSHCHAT_WEBPUSH_CA_FILE=$etc/apns-ca.pem"
} >>"$etc/pushchat.env"

step "Android phones (the guide's §3): the Firebase service account, the sender's alone"
cp "$certs/fcm-service-account.json" "$keys/"
run_guide_block android "$keys" /dev/null
[ "$(stat -c '%a %U %G' "$etc/fcm-service-account.json")" = "640 root pushchat" ] || die "the service account is not 0640 root:pushchat"
grep -q "^PUSHCHAT_FCM_SERVICE_ACCOUNT_FILE=$etc/fcm-service-account.json$" "$etc/apns.env" || die "apns.env does not name the service account"

step "browsers (the guide's §3): the VAPID key, the sender's alone; its public half for the API"
run_guide_block browsers "$keys" /dev/null
[ "$(stat -c '%a %U %G' "$etc/vapid.pem")" = "640 root pushchat" ] || die "the VAPID key is not 0640 root:pushchat"
grep -q "^PUSHCHAT_WEBPUSH_VAPID_KEY_FILE=$etc/vapid.pem$" "$etc/apns.env" || die "apns.env does not name the VAPID key"
vapid_public=$(grep '^PUSHCHAT_WEBPUSH_PUBLIC_KEY=' "$etc/pushchat.env" | cut -d= -f2-)
[ "$vapid_public" = "$("$prefix/current/bin/pushchat-api" webpush public-key "$etc/vapid.pem")" ] && [ ${#vapid_public} = 87 ] \
    || die "pushchat.env does not hold the VAPID key's public half ($vapid_public)"
grep -q '^PUSHCHAT_WEBPUSH_VAPID_KEY_FILE' "$etc/pushchat.env" && die "pushchat.env (read by the API's unit) names the VAPID key file"

step "migrate as the owner, the services' grants (the guide's §4) and the metrics folder (§6)"
run_guide_block migrate "$repo" /dev/null
grep -q "001" "$scratch/guide.log" || die "migrate --status listed nothing"
run_guide_block metrics "$repo" /dev/null
run_guide_block keys "$repo" /dev/null
api_key=$(grep -E '^pck_[A-Za-z0-9_-]{43}$' "$scratch/guide.log" | tail -n 1)
[ -n "$api_key" ] || die "keys create printed no key on its last line"
run_guide_block webhooks "$repo" /dev/null
webhook_secret=$(grep -E '^whsec_[A-Za-z0-9+/=]{40,}$' "$scratch/guide.log" | tail -n 1)
[ -n "$webhook_secret" ] || die "webhooks add printed no secret on its last line"
# The receiver checks every POST's signature with Python's hmac (not the project's signer).
python3 Tests/IntegrationTests/Support/webhook_receiver.py --port "$webhook_port" --secret "$webhook_secret" \
    >"$scratch/webhooks.jsonl" 2>"$scratch/webhooks.log" &
receiver_pid=$!
owner=$(db "SELECT tableowner FROM pg_tables WHERE tablename = 'push_queue'")
[ "$owner" = pushchat_owner ] || die "push_queue belongs to $owner, not pushchat_owner"
service_url=$(grep '^PUSHCHAT_DATABASE_URL=' "$etc/pushchat.env" | cut -d= -f2-)
psql "$service_url" -qtAc 'SELECT count(*) FROM push_queue' >/dev/null || die "the services' role cannot read the queue"
psql "$service_url" -qtAc 'SELECT count(*) FROM push_deliveries, push_history' >/dev/null || die "the services' role cannot read push_deliveries and push_history"
if psql "$service_url" -v ON_ERROR_STOP=1 -qc 'CREATE TABLE intruder ()' >/dev/null 2>&1 \
    || psql "$service_url" -v ON_ERROR_STOP=1 -qc 'ALTER TABLE push_queue ADD COLUMN intruder int' >/dev/null 2>&1; then
    die "the services' role may change the schema"
fi
psql "$service_url" -qtAc 'SELECT count(*) FROM api_keys' >/dev/null || die "the services' role cannot read the keys"
if psql "$service_url" -v ON_ERROR_STOP=1 -qc "UPDATE webhooks SET url = 'https://attacker.example/'" >/dev/null 2>&1; then
    die "the services' role may point a webhook elsewhere"
fi
if psql "$service_url" -v ON_ERROR_STOP=1 -qc "INSERT INTO api_keys (name, key_hash) VALUES ('intruder', 'x')" >/dev/null 2>&1 \
    || psql "$service_url" -v ON_ERROR_STOP=1 -qc "UPDATE api_keys SET scopes = '{send,broadcast}'" >/dev/null 2>&1; then
    die "the services' role may write api_keys"
fi

# A unit's ExecStart as systemd runs it: in the foreground (a oneshot's run), or started (a service: its pid kept).
# The unit files: the installed release's, or (the upgrade) the copies in /etc/systemd/system the guide makes.
units_dir=$prefix/current/deploy/systemd
declare -A unit_pids=() unit_logs=()
unit() { python3 "$repo/scripts/lib/unit.py" "${maps[@]}" "$units_dir/$1"; }
start_unit() {
    python3 "$repo/scripts/lib/unit.py" "${maps[@]}" "$units_dir/$1" >"$2" 2>&1 &
    pids+=($!)
    unit_pids[$1]=$!
    unit_logs[$1]=$2
}
# `systemctl restart UNIT` for a service started by start_unit: SIGTERM, status 0, started again (a new log). As
# systemd finishes a start before it acts on the next job, a unit restarted twice in a row is first up (its log says
# it started, its SIGTERM handler in place) before the second SIGTERM; a process killed while still starting would die
# of the signal (status 143, which systemd also counts as a clean stop).
restart_unit() {
    local name=$1.service pid=${unit_pids[$1.service]:-}
    [ -n "$pid" ] || die "systemctl restart $1: the unit is not running"
    for _ in $(seq 1 200); do
        grep -q ' started' "${unit_logs[$name]}" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -TERM "$pid"
    wait "$pid" || die "$1 exited with status $? on systemctl restart"
    local kept=() other
    for other in "${pids[@]}"; do [ "$other" = "$pid" ] || kept+=("$other"); done
    pids=("${kept[@]}")
    restarts=$((${restarts:-0} + 1))
    start_unit "$name" "$scratch/$1-restart-$restarts.log"
}

# The API and the push daemon from their units, logs api-NAME.log and push-NAME.log, both ready within 20 s.
start_services() {
    start_unit pushchat-api.service "$scratch/api$1.log"
    start_unit pushchat-push.service "$scratch/push$1.log"
    for _ in $(seq 1 100); do
        curl -fsS http://127.0.0.1:44447/readyz >/dev/null 2>&1 && curl -fsS http://127.0.0.1:44448/readyz >/dev/null 2>&1 && break
        sleep 0.2
    done
    curl -fsS http://127.0.0.1:44447/readyz >/dev/null || die "the API is not ready ($2): $(grep -v 'GET /readyz' "$scratch/api$1.log" | head -n 12)"
    curl -fsS http://127.0.0.1:44448/readyz >/dev/null || die "the push daemon is not ready ($2: no database or no gateway connection)"
}

step "the services, started from their unit files"
start_services "" "this release"
grep -q "Connection OK (HTTP/2)" "$scratch/push.log" || die "the push daemon did not connect over HTTP/2"

step "secrets: the API's process cannot read Apple's key or the APNs credentials"
api_pid=${pids[1]} push_pid=${pids[2]}
[ "$(stat -c %U "/proc/$api_pid")" = pushchat-api ] || die "the API does not run as pushchat-api"
[ "$(stat -c %U "/proc/$push_pid")" = pushchat ] || die "the push daemon does not run as pushchat"
tr '\0' '\n' <"/proc/$api_pid/environ" | grep -q '^PUSHCHAT_DATABASE_URL=' || die "the API's environment has no database URL"
tr '\0' '\n' <"/proc/$api_pid/environ" | grep -q '^PUSHCHAT_APNS_\(KEY\|TEAM\|CERTIFICATE\|PASSPHRASE\)' \
    && die "the API's environment holds APNs credentials"
tr '\0' '\n' <"/proc/$push_pid/environ" | grep -q '^PUSHCHAT_APNS_KEY_FILE=.*/AuthKey_DEVKEY0001.p8$' \
    || die "the push daemon has no key file"
for file in AuthKey_DEVKEY0001.p8 apns.env pushchat.env fcm-service-account.json; do
    runuser -u pushchat-api -- cat "$etc/$file" >/dev/null 2>&1 && die "the API's user can read $file"
    runuser -u pushchat -- cat "$etc/$file" >/dev/null 2>&1 || die "the sender's user cannot read $file"
done
# Nothing under /etc/pushchat is writable by the services' users: a compromised daemon cannot replace a key, a
# certificate or its own settings.
for file in "$etc"/* "$etc"; do
    for user in pushchat pushchat-api; do
        runuser -u "$user" -- test -w "$file" && die "$user may write $file"
    done
done

step "two joins and a message (and a device Apple calls unregistered)"
post() { curl -sS -o /dev/null -w '%{http_code}' http://127.0.0.1:44447/api.php "$@"; }
token_a=$(printf 'a1%.0s' {1..32})
token_b=$(printf 'b2%.0s' {1..32})
token_c=$(printf 'ab%.0s' {1..32})
[ "$(post --data-urlencode cmd=join --data-urlencode udid=1111111111111111111111111111111111111111 --data-urlencode "token=$token_a" --data-urlencode name=Ann --data-urlencode code=deploy)" = 200 ] || die "join A"
[ "$(post --data-urlencode cmd=join --data-urlencode udid=2222222222222222222222222222222222222222 --data-urlencode "token=$token_b" --data-urlencode name=Bob --data-urlencode code=deploy)" = 200 ] || die "join B"
[ "$(post --data-urlencode cmd=join --data-urlencode udid=3333333333333333333333333333333333333333 --data-urlencode "token=$token_c" --data-urlencode name=Cid --data-urlencode code=deploy)" = 200 ] || die "join C"
[ "$(post --data-urlencode cmd=message --data-urlencode udid=1111111111111111111111111111111111111111 --data-urlencode 'text=Deployed by the guide')" = 200 ] || die "message"
for _ in $(seq 1 100); do
    grep -q "$token_b" "$scratch/record.jsonl" 2>/dev/null && break
    sleep 0.1
done
grep "$token_b" "$scratch/record.jsonl" | grep -q "Ann: Deployed by the guide" || die "the message did not arrive at the simulator"
for _ in $(seq 1 50); do
    [ "$(db "SELECT count(*) FROM push_queue WHERE time_sent IS NULL AND time_failed IS NULL")" = 0 ] && break
    sleep 0.1
done

step "an iPhone and an Android phone in one room: the message goes out over APNs and FCM"
token_f="dEpl0yAndroid:APA91b$(printf 'Z%.0s' {1..140})"
token_i=$(printf 'c3%.0s' {1..32})
[ "$(post --data-urlencode cmd=join --data-urlencode udid=4444444444444444444444444444444444444444 --data-urlencode "token=$token_i" --data-urlencode name=Eve --data-urlencode code=mixed)" = 200 ] || die "join Eve (iPhone)"
[ "$(post --data-urlencode cmd=join --data-urlencode udid=5555555555555555555555555555555555555555 --data-urlencode "token=$token_f" --data-urlencode name=Dee --data-urlencode code=mixed --data-urlencode platform=fcm)" = 200 ] || die "join Dee (Android, platform=fcm)"
# A browser subscribes (the simulator's status page plays the browser, with the key the API serves its pages) and joins.
page_key=$(curl -fsS -H "Authorization: Bearer $api_key" http://127.0.0.1:44447/v1/webpush/public-key | python3 -c 'import json, sys; print(json.load(sys.stdin)["public_key"])') \
    || die "GET /v1/webpush/public-key"
[ "$page_key" = "$vapid_public" ] || die "the API serves $page_key, not the VAPID key's public half"
subscription=$(curl -fsS -X POST -H 'Content-Type: application/json' --data "{\"app\":\"default\",\"application_server_key\":\"$page_key\"}" "http://127.0.0.1:$status_port/browsers") \
    || die "the simulator's browser did not subscribe"
browser_id=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["endpoint"].rsplit("/", 1)[1])' "$subscription")
[ "$(post --data-urlencode cmd=join --data-urlencode udid=6666666666666666666666666666666666666666 --data-urlencode "token=$subscription" --data-urlencode name=Bea --data-urlencode code=mixed --data-urlencode platform=web)" = 200 ] || die "join Bea (a browser, platform=web)"
[ "$(post --data-urlencode cmd=message --data-urlencode udid=4444444444444444444444444444444444444444 --data-urlencode 'text=Hello Android')" = 200 ] || die "message to the mixed room"
for _ in $(seq 1 100); do
    grep -q "$token_f" "$scratch/record.jsonl" 2>/dev/null && break
    sleep 0.1
done
grep "$token_f" "$scratch/record.jsonl" | grep '"format":"fcm"' | grep -q 'Eve: Hello Android' || die "the message did not arrive at the simulator's FCM (see push.log)"
grep -q 'Connection OK (FCM)' "$scratch/push.log" || die "the push daemon logged no FCM connection"
for _ in $(seq 1 100); do
    grep -q "\"token\":\"$browser_id\"" "$scratch/record.jsonl" 2>/dev/null && break
    sleep 0.1
done
grep "\"token\":\"$browser_id\"" "$scratch/record.jsonl" | grep '"format":"web"' | grep -q 'Hello Android' \
    || die "the message did not arrive at the simulator's browser (see push.log)"
for _ in $(seq 1 50); do
    [ "$(db "SELECT count(*) FROM push_deliveries WHERE platform = 'web' AND time_sent IS NOT NULL")" = 1 ] && break
    sleep 0.1
done
[ "$(db "SELECT count(*) FROM push_deliveries WHERE platform = 'web' AND time_sent IS NOT NULL")" = 1 ] || die "the browser's row is not stamped sent"
for _ in $(seq 1 50); do
    [ "$(db "SELECT count(*) FROM push_deliveries WHERE platform = 'fcm' AND time_sent IS NOT NULL")" = 1 ] && break
    sleep 0.1
done
[ "$(db "SELECT count(*) FROM push_deliveries WHERE platform = 'fcm' AND time_sent IS NOT NULL")" = 1 ] || die "the Android row is not stamped sent"
for udid in 4444444444444444444444444444444444444444 5555555555555555555555555555555555555555; do
    [ "$(post --data-urlencode cmd=leave --data-urlencode udid=$udid)" = 200 ] || die "leave $udid"
done
[ "$(db "SELECT count(*) FROM push_deliveries WHERE time_sent IS NOT NULL AND device_token = '$token_b'")" = 1 ] || die "B's row is not stamped sent"
[ "$(db "SELECT count(*) FROM push_deliveries WHERE time_failed IS NOT NULL AND device_token = '$token_c'")" = 1 ] || die "C's row did not fail (410)"

step "the provider API with the guide's key: a device, a notification to its user, its status"
v1() { curl -sS -H "Authorization: Bearer $api_key" -H 'Content-Type: application/json' "$@"; }
token_d=$(printf 'd4%.0s' {1..32})
v1 -o /dev/null -w '%{http_code}' -d "{\"token\": \"$token_d\", \"user\": \"ops\"}" http://127.0.0.1:44447/v1/devices | grep -q 201 \
    || die "POST /v1/devices"
answer=$(v1 -d '{"to": {"users": ["ops"]}, "aps": {"alert": "Deployed", "badge": 1}, "data": {"server": {"name": "web1"}}}' \
    http://127.0.0.1:44447/v1/notifications)
notification=$(printf '%s' "$answer" | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])') || die "POST /v1/notifications: $answer"
for _ in $(seq 1 100); do
    grep -q "$token_d" "$scratch/record.jsonl" 2>/dev/null && break
    sleep 0.1
done
grep "$token_d" "$scratch/record.jsonl" | grep -q 'web1' || die "the provider notification did not arrive at the simulator"
for _ in $(seq 1 50); do
    v1 "http://127.0.0.1:44447/v1/notifications/$notification" | grep -q '"sent":1' && break
    sleep 0.1
done
v1 "http://127.0.0.1:44447/v1/notifications/$notification" | grep -q '"sent":1' || die "the notification's status does not say sent"
[ "$(curl -sS -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer pck_wrong' "http://127.0.0.1:44447/v1/devices?user=ops")" = 401 ] \
    || die "an unknown key was not refused"
[ "$(v1 -o /dev/null -w '%{http_code}' "http://127.0.0.1:44447/v1/devices?user=ops")" = 403 ] \
    || die "the guide's key (default scopes) could list devices"

step "delivery events (the guide's webhook): the 410 and the provider notification's completion, signed"
for _ in $(seq 1 200); do
    grep -q "notification.completed" "$scratch/webhooks.jsonl" && grep -q "device.unregistered" "$scratch/webhooks.jsonl" && break
    sleep 0.1
done
python3 - "$scratch/webhooks.jsonl" "$token_c" "$notification" <<'CHECK' || die "the webhook's events: $(cat "$scratch/webhooks.jsonl")"
import json, sys
posts = [json.loads(line) for line in open(sys.argv[1]) if line.startswith('{"n"')]
assert posts and all(p["verified"] == [True] and p["answer"] == 200 for p in posts), "unsigned or refused POSTs"
events = [e for p in posts for e in p["events"]]
assert any(e["type"] == "device.unregistered" and e["data"]["token"] == sys.argv[2] for e in events), "no device.unregistered for C"
assert any(e["type"] == "notification.completed" and e["data"]["notification_id"] == sys.argv[3] and e["data"]["sent"] == 1
           for e in events), "no notification.completed for the provider notification"
assert not any(e["type"] == "notification.sent" for e in events), "notification.sent without asking for it"
CHECK
api_as_postgres() { (cd "$prefix/current" && runuser -u postgres -- env PUSHCHAT_DATABASE_URL="postgres://postgres@localhost:$pg_port/pushchat?host=/run/postgresql" bin/pushchat-api "$@"); }
api_as_postgres webhooks list production | grep -q "^backend	default	http://127.0.0.1:$webhook_port/pushchat	" || die "webhooks list: $(api_as_postgres webhooks list production 2>&1)"

step "a second app with a client certificate (the guide's §4, Several apps): its key sends to its devices, with its topic"
cp "$certs/ck.pem" "$keys/beta.pem"
printf 'deploy-test\n' >"$keys/beta.pass"
run_guide_block apps "$keys" /dev/null
[ "$(stat -c '%a %U %G' "$etc/beta.pass")" = "640 root pushchat" ] || die "beta.pass is not 0640 root:pushchat"
beta_key=$(grep -E '^pck_[A-Za-z0-9_-]{43}$' "$scratch/guide.log" | tail -n 1)
[ -n "$beta_key" ] && [ "$beta_key" != "$api_key" ] || die "keys create --app beta printed no new key"
if psql "$service_url" -v ON_ERROR_STOP=1 -qc "UPDATE apps SET certificate = '/etc/shadow'" >/dev/null 2>&1; then
    die "the services' role may write apps"
fi
beta() { curl -sS -H "Authorization: Bearer $beta_key" -H 'Content-Type: application/json' "$@"; }
token_e=$(printf 'e5%.0s' {1..32})
# The same user as the default app's device above: beta's key reaches beta's device only.
beta -o /dev/null -w '%{http_code}' -d "{\"token\": \"$token_e\", \"user\": \"ops\"}" http://127.0.0.1:44447/v1/devices | grep -q 201 \
    || die "POST /v1/devices with beta's key"
answer=$(beta -d '{"to": {"users": ["ops"]}, "aps": {"alert": "Beta build"}}' http://127.0.0.1:44447/v1/notifications)
printf '%s' "$answer" | grep -q '"recipients":1' || die "beta's user ops is not its one device: $answer"
# The daemon reads the apps every few seconds; beta's connection opens once it has rows.
for _ in $(seq 1 200); do
    grep -q "$token_e" "$scratch/record.jsonl" 2>/dev/null && break
    sleep 0.1
done
grep "$token_e" "$scratch/record.jsonl" | grep -q '"topic":"com.example.PushChat.beta"' \
    || die "beta's notification did not arrive with its topic (see push.log)"
grep -q 'App beta: com.example.PushChat.beta in sandbox' "$scratch/push.log" || die "the push daemon did not start beta's sender"
[ "$(db "SELECT count(*) FROM push_deliveries WHERE app = 'beta' AND time_sent IS NOT NULL")" = 1 ] || die "beta's row is not stamped sent"
[ "$(db "SELECT count(*) FROM push_deliveries WHERE app = 'default' AND device_token = '$token_e'")" = 0 ] \
    || die "beta's notification went to the default app"

step "the feedback and prune jobs, as their timers run them"
# The simulator dates its 410 a minute back; Cid registered seconds ago, so Apple's rule would keep him (he
# registered again after the report). Date his registration an hour back, as a phone that has been gone a while.
db "UPDATE active_users SET token_updated_at = now() - interval '1 hour' WHERE nickname = 'Cid'" >/dev/null
users_before=$(db "SELECT count(*) FROM active_users")
unit pushchat-feedback.service >"$scratch/feedback.log" 2>&1 || die "the feedback job failed"
grep -q "Feedback:" "$scratch/feedback.log" || die "the feedback job logged no summary"
[ "$(db "SELECT count(*) FROM active_users WHERE nickname = 'Cid'")" = 0 ] && [ "$(db "SELECT count(*) FROM active_users")" = $((users_before - 1)) ] \
    || die "the feedback job did not delete the unregistered device (and it alone)"
[ -s "$metrics/pushchat_feedback.prom" ] || die "no metrics file"
grep -q '^pushchat_feedback_success 1' "$metrics/pushchat_feedback.prom" || die "the metrics file does not say success"
[ "$(stat -c '%a' "$metrics/pushchat_feedback.prom")" = 644 ] || die "node_exporter cannot read the metrics file"
unit pushchat-prune.service >"$scratch/prune.log" 2>&1 || die "the prune job failed"
grep -q "rows older than 7d deleted" "$scratch/prune.log" || die "the prune job logged nothing"
grep -q '^pushchat_prune_success 1' "$metrics/pushchat_prune.prom" || die "the prune job's metrics file does not say success"

step "the crontab's lines, as cron runs them (sh, as the user pushchat)"
install -d -o pushchat "$scratch/cron"
while IFS= read -r line; do
    case "$line" in "#"* | "" | MAILTO=*) continue ;; esac
    command=$(printf '%s\n' "$line" | cut -d' ' -f6- | sed -e "s#/opt/pushchat#$prefix#g" -e "s#/etc/pushchat#$etc#g" \
        -e "s#/var/lib/prometheus/node-exporter#$metrics#g" -e "s#| logger -t \([a-z-]*\)#>>$scratch/cron/\1.log#")
    runuser -u pushchat -- sh -c "$command" 2>>"$scratch/cron.log" || die "a crontab line failed: $line"
done <deploy/crontab
grep -q "Feedback:" "$scratch/cron/pushchat-feedback.log" || die "the crontab's feedback line logged no summary"
grep -q "rows older than 7d deleted" "$scratch/cron/pushchat-prune.log" || die "the crontab's prune line logged nothing"

# What the services export after that traffic, for the alert rules' check below.
curl -fsS http://127.0.0.1:44449/metrics >"$scratch/exported.metrics" || die "the API's /metrics"
curl -fsS http://127.0.0.1:44448/metrics >>"$scratch/exported.metrics" || die "the push daemon's /metrics"
cat "$metrics/pushchat_feedback.prom" >>"$scratch/exported.metrics"
cat "$metrics/pushchat_prune.prom" >>"$scratch/exported.metrics" || die "the prune job wrote no metrics file"

step "rotations (the guide's §10): the team's .p8 key with an app that names it, and the Firebase service account's key"
# gamma: an app added with the team's key file, as §4 adds one; the rotation moves it to the new key.
(cd "$prefix/current" && runuser -u postgres -- env "PUSHCHAT_DATABASE_URL=postgres://postgres@localhost:$pg_port/pushchat?host=/run/postgresql" \
    bin/pushchat-api apps add gamma production --role pushchat_owner --bundle-id com.example.PushChat.gamma --environment sandbox \
    --key-file "$etc/AuthKey_DEVKEY0001.p8" --team-id DEVTEAM001) >>"$scratch/guide.log" 2>&1 || die "apps add gamma"
cp "$certs/AuthKey_BETAKEY001.p8" "$keys/"
run_guide_block rotate-key "$keys" /dev/null
grep -q "^gamma.*key DEVKEY0001 team DEVTEAM001 $etc/AuthKey_DEVKEY0001.p8" "$scratch/guide.log" || die "apps list did not show gamma's key file"
run_guide_block rotate-key-done "$keys" /dev/null
[ ! -e "$etc/AuthKey_DEVKEY0001.p8" ] || die "the old key's file is still there"
# Both apps send with the new key: the default app (apns.env) and gamma (apps update), the old file gone.
token_g=$(printf '9a%.0s' {1..32})
token_h=$(printf '9b%.0s' {1..32})
db "INSERT INTO push_queue (app, device_token, payload) VALUES
    ('gamma', '$token_g', '{\"aps\":{\"alert\":\"gamma, new key\"}}'), ('default', '$token_h', '{\"aps\":{\"alert\":\"default, new key\"}}')" >/dev/null
for _ in $(seq 1 200); do
    grep -q "$token_g" "$scratch/record.jsonl" && grep -q "$token_h" "$scratch/record.jsonl" && break
    sleep 0.1
done
grep "$token_g" "$scratch/record.jsonl" | grep '"topic":"com.example.PushChat.gamma"' | grep -q '"key_id":"BETAKEY001"' \
    || die "gamma did not send with the new key after apps update"
grep "$token_h" "$scratch/record.jsonl" | grep -q '"key_id":"BETAKEY001"' || die "the default app did not send with the new key"
echo "    the team key rotated: the default app and gamma sign with BETAKEY001, the old file deleted"
run_guide_block rotate-fcm "$keys" /dev/null
[ "$(stat -c '%a %U %G' "$etc/fcm-service-account-2.json")" = "640 root pushchat" ] || die "the new service account is not 0640 root:pushchat"
run_guide_block rotate-fcm-done "$keys" /dev/null
[ ! -e "$etc/fcm-service-account.json" ] || die "the old service account's file is still there"
restart_unit pushchat-push
[ "$(post --data-urlencode cmd=join --data-urlencode udid=4444444444444444444444444444444444444444 --data-urlencode "token=$token_i" --data-urlencode name=Eve --data-urlencode code=rotated)" = 200 ] || die "join Eve"
[ "$(post --data-urlencode cmd=join --data-urlencode udid=5555555555555555555555555555555555555555 --data-urlencode "token=$token_f" --data-urlencode name=Dee --data-urlencode code=rotated --data-urlencode platform=fcm)" = 200 ] || die "join Dee"
[ "$(post --data-urlencode cmd=message --data-urlencode udid=4444444444444444444444444444444444444444 --data-urlencode 'text=After the rotation')" = 200 ] || die "message after the rotation"
for _ in $(seq 1 100); do
    grep "$token_f" "$scratch/record.jsonl" | grep -q 'After the rotation' && break
    sleep 0.1
done
grep "$token_f" "$scratch/record.jsonl" | grep -q 'Eve: After the rotation' || die "no Android notification with the new service-account key"
grep -q 'Connection OK (FCM)' "$scratch/pushchat-push-restart-$restarts.log" || die "no FCM connection after the rotation"
for udid in 4444444444444444444444444444444444444444 5555555555555555555555555555555555555555; do
    [ "$(post --data-urlencode cmd=leave --data-urlencode udid=$udid)" = 200 ] || die "leave $udid"
done
echo "    the service account's key rotated: Android sends with fcm-service-account-2.json, the old file deleted"

step "SIGTERM stops the services with status 0"
for pid in "${pids[@]:1}"; do kill -TERM "$pid"; done
for pid in "${pids[@]:1}"; do wait "$pid" || die "a service exited with status $? on SIGTERM"; done
pids=("${pids[0]}")

step "behind PgBouncer (the guide's block; transaction pooling, 2 server connections), three API processes"
install -d "$scratch/etc/pgbouncer"
run_guide_block pgbouncer "$repo" /dev/null
for _ in $(seq 1 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$bouncer_port") 2>/dev/null && break
    sleep 0.1
done
# As the guide says: the URL names PgBouncer's port, the LISTEN URL PostgreSQL's.
python3 - "$etc/pushchat.env" "$pg_port" "$bouncer_port" <<'EOF'
import sys
path, pg_port, bouncer_port = sys.argv[1:]
lines = open(path).read().splitlines()
direct = next(line.split("=", 1)[1] for line in lines if line.startswith("PUSHCHAT_DATABASE_URL="))
pooled = direct.replace(f"@localhost:{pg_port}/", f"@localhost:{bouncer_port}/")
assert pooled != direct, "the URL does not name localhost's PostgreSQL port"
lines = [f"PUSHCHAT_DATABASE_URL={pooled}" if line.startswith("PUSHCHAT_DATABASE_URL=") else line for line in lines]
lines.append(f"PUSHCHAT_DATABASE_LISTEN_URL={direct}")
open(path, "w").write("\n".join(lines) + "\n")
EOF
api_ports=(44447 "$(free_port)" "$(free_port)")
for n in 1 2; do
    # A second and third API, each its own unit instance with a drop-in for its ports (as `systemctl edit` writes).
    printf '[Service]\nEnvironment=PUSHCHAT_API_PORT=%s PUSHCHAT_API_METRICS_PORT=%s\n' "${api_ports[$n]}" "$(free_port)" \
        >"$scratch/api-$n.conf"
    python3 "$repo/scripts/lib/unit.py" "${maps[@]}" --dropin "$scratch/api-$n.conf" "$prefix/current/deploy/systemd/pushchat-api.service" \
        >"$scratch/api-$n.log" 2>&1 &
    pids+=($!)
done
start_unit pushchat-api.service "$scratch/api-0.log"
start_unit pushchat-push.service "$scratch/push-pooled.log"
for port in "${api_ports[@]}"; do
    for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null || die "the API on port $port is not ready behind PgBouncer"
done
for _ in $(seq 1 100); do curl -fsS http://127.0.0.1:44448/readyz >/dev/null 2>&1 && break; sleep 0.2; done
curl -fsS http://127.0.0.1:44448/readyz >/dev/null || die "the push daemon is not ready behind PgBouncer"
for n in 0 1 2; do grep -q "Database session: pooled" "$scratch/api-$n.log" || die "API $n did not find the pooler"; done
grep -q "Database session: pooled" "$scratch/push-pooled.log" || die "the push daemon did not find the pooler"
grep -q "LISTEN push_queue on database_listen_url" "$scratch/push-pooled.log" || die "the push daemon does not LISTEN directly"
# The most backends the services' role held at once while the traffic ran: PgBouncer's 2 and the daemon's LISTEN.
(
    most=0
    while [ ! -e "$scratch/traffic-done" ]; do
        now=$(db "SELECT count(*) FROM pg_stat_activity WHERE usename = 'pushchat' AND backend_type = 'client backend'")
        [ "$now" -gt "$most" ] && most=$now
        echo "$most" >"$scratch/backends-most"
        sleep 0.05
    done
) &
sampler=$!
members=12
clients=()
for i in $(seq 1 $members); do
    udid=$(printf '%040d' "$((9000 + i))")
    token=$(printf '%064x' "$((0xc0de00 + i))")
    port=${api_ports[$((i % 3))]}
    curl -sS -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$port/api.php" --data-urlencode cmd=join \
        --data-urlencode "udid=$udid" --data-urlencode "token=$token" --data-urlencode "name=P$i" \
        --data-urlencode code=pooled >"$scratch/join-$i.code" &
    clients+=($!)
done
# Every client's answer, all at once: 200 each.
wait_codes() {
    local pid file
    for pid in "${clients[@]}"; do wait "$pid" || true; done
    clients=()
    for file in "$scratch"/"$1"-*.code; do [ "$(cat "$file")" = 200 ] || die "a $1 through PgBouncer answered $(cat "$file")"; done
}
wait_codes join
for i in $(seq 1 $members); do
    udid=$(printf '%040d' "$((9000 + i))")
    port=${api_ports[$((i % 3))]}
    curl -sS -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$port/api.php" --data-urlencode cmd=message \
        --data-urlencode "udid=$udid" --data-urlencode "text=pooled $i" >"$scratch/message-$i.code" &
    clients+=($!)
done
wait_codes message
expected=$((members * (members - 1)))
delivered_once pooled "$expected" "through PgBouncer"
touch "$scratch/traffic-done"
wait "$sampler"
most=$(cat "$scratch/backends-most")
[ "$most" -le 3 ] || die "the services held $most PostgreSQL backends (PgBouncer's pool of 2 and one LISTEN at most)"
echo "    $expected notifications through 3 APIs and the daemon behind PgBouncer, at most $most backends at once"
# The services' database password rotated (§10) while they run through PgBouncer: old connections stay, the restarted
# API and daemon log in with the new one, the old one is refused.
old_url=$(grep '^PUSHCHAT_DATABASE_LISTEN_URL=' "$etc/pushchat.env" | cut -d= -f2-)
new_password='Rotated&pass/w0rd#2'
new_password_encoded=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$new_password")
printf '%s\n%s\n' "$new_password" "$new_password" >"$scratch/password-input"
run_guide_block rotate-db-password "$repo" "$scratch/password-input"
grep -q "^PUSHCHAT_DATABASE_URL=postgres://pushchat:$new_password_encoded@localhost:$bouncer_port/" "$etc/pushchat.env" \
    && grep -q "^PUSHCHAT_DATABASE_LISTEN_URL=postgres://pushchat:$new_password_encoded@localhost:$pg_port/" "$etc/pushchat.env" \
    || die "the rotation did not put the new password in both URLs"
psql "$old_url" -qtAc 'SELECT 1' >/dev/null 2>&1 && die "the old database password still logs in"
for _ in $(seq 1 100); do curl -fsS http://127.0.0.1:44448/readyz >/dev/null 2>&1 && break; sleep 0.2; done
curl -fsS http://127.0.0.1:44447/readyz >/dev/null && curl -fsS http://127.0.0.1:44448/readyz >/dev/null \
    || die "the services are not ready after the password rotation"
[ "$(post --data-urlencode cmd=message --data-urlencode "udid=$(printf '%040d' 9001)" --data-urlencode 'text=rotated 1')" = 200 ] \
    || die "a message after the password rotation"
delivered_once rotated "$((members - 1))" "after the password rotation"
echo "    the database password rotated: the restarted services log in through PgBouncer with the new one"
for pid in "${pids[@]:1}"; do kill -TERM "$pid"; done
for pid in "${pids[@]:1}"; do wait "$pid" || die "a service behind PgBouncer exited with status $? on SIGTERM"; done
pids=("${pids[0]}")

step "behind nginx (Debian's package, deploy/nginx-pushchat.conf as written but for the certificate and port)"
command -v nginx >/dev/null || die "nginx is not installed (scripts/test.sh installs Debian's)"
# The guide's settings for a proxy in front, in the environment file.
printf '%s\n' PUSHCHAT_API_HOST=127.0.0.1 PUSHCHAT_API_TRUSTED_PROXIES=127.0.0.1/32 PUSHCHAT_API_MAX_CONNECTIONS_PER_IP=0 \
    >>"$etc/pushchat.env"
# A copy of Debian's /etc/nginx (and /etc/nftables.conf) for the guide's blocks; nginx.conf's own paths moved there.
install -d "$scratch/etc" "$scratch/www" "$scratch/nginx-log"
cp -a /etc/nginx "$scratch/etc/nginx"
sed -i -e "s#/etc/nginx#$scratch/etc/nginx#g" -e "s#/run/nginx.pid#$scratch/nginx.pid#" -e "s#/var/log/nginx#$scratch/nginx-log#g" \
    "$scratch/etc/nginx/nginx.conf"
cp /etc/nftables.conf "$scratch/etc/nftables.conf"
nginx_port=$(free_port)
nginx_http_port=$(free_port)
run_guide_block nginx "$repo" /dev/null
[ -n "$nginx_pid" ] || die "the guide's nginx block did not start nginx"
grep -q '^worker_rlimit_nofile 65536;' "$scratch/etc/nginx/nginx.conf" && grep -q 'worker_connections 16384;' "$scratch/etc/nginx/nginx.conf" \
    || die "the guide's block did not size nginx's connections"
run_guide_block nginx "$repo" /dev/null
[ "$(grep -c '^worker_rlimit_nofile' "$scratch/etc/nginx/nginx.conf")" = 1 ] || die "running the nginx block twice repeats worker_rlimit_nofile"
run_guide_block firewall "$repo" /dev/null
grep -q 'table inet pushchat' "$scratch/nftables.log" && grep -q 'tcp dport { 22, 80, 443 } accept' "$scratch/nftables.log" \
    || die "the firewall's rules were not loaded: $(cat "$scratch/nftables.log")"
start_unit pushchat-api.service "$scratch/api-nginx.log"
start_unit pushchat-push.service "$scratch/push-nginx.log"
https() { curl -sS --cacert "$certs/ca.pem" "$@"; }
site=https://localhost:$nginx_port
for _ in $(seq 1 100); do curl -fsS http://127.0.0.1:44447/readyz >/dev/null 2>&1 && break; sleep 0.2; done
https -f "$site/healthz" >/dev/null || die "/healthz through nginx"
headers=$(https -sS -D - -o /dev/null "$site/healthz")
grep -qi '^strict-transport-security: max-age=63072000' <<<"$headers" || die "no HSTS header through nginx: $headers"
grep -qi '^server: nginx.\?$' <<<"$headers" || die "nginx names its version: $(grep -i '^server:' <<<"$headers")"
[ "$(https -o /dev/null -w '%{http_code}' "$site/readyz")" = 404 ] || die "nginx passes /readyz"
# Port 80: the ACME challenges from the webroot, everything else redirected to HTTPS.
echo challenge-ok >"$scratch/www/letsencrypt/probe" && install -d "$scratch/www/letsencrypt/.well-known/acme-challenge"
mv "$scratch/www/letsencrypt/probe" "$scratch/www/letsencrypt/.well-known/acme-challenge/probe"
[ "$(curl -sS "http://127.0.0.1:$nginx_http_port/.well-known/acme-challenge/probe")" = challenge-ok ] || die "port 80 does not serve the ACME challenge"
[ "$(curl -sS -o /dev/null -w '%{http_code} %{redirect_url}' "http://localhost:$nginx_http_port/api.php")" = "301 https://localhost/api.php" ] \
    || die "port 80 does not redirect to HTTPS"
[ "$(https -o /dev/null -w '%{http_code}' "$site/metrics")" = 404 ] || die "nginx passes /metrics"
[ "$(https -o /dev/null -w '%{http_code}' "$site/test/")" = 404 ] || die "nginx passes the test pages"
[ "$(curl -sS -o /dev/null -w '%{http_code}' http://127.0.0.1:44447/healthz)" = 200 ] || die "the API does not listen on loopback"
token_e=$(printf 'e5%.0s' {1..32})
[ "$(https -o /dev/null -w '%{http_code}' "$site/api.php" --data-urlencode cmd=join \
    --data-urlencode udid=5555555555555555555555555555555555555555 --data-urlencode "token=$token_e" \
    --data-urlencode name=Eve --data-urlencode code=deploy)" = 200 ] || die "join through nginx"
[ "$(https -o /dev/null -w '%{http_code}' "$site/api.php" --data-urlencode cmd=message \
    --data-urlencode udid=2222222222222222222222222222222222222222 --data-urlencode 'text=Through nginx')" = 200 ] \
    || die "message through nginx"
answer=$(https -H "Authorization: Bearer $api_key" -H 'Content-Type: application/json' \
    -d '{"to": {"users": ["ops"]}, "aps": {"alert": "Via nginx"}}' "$site/v1/notifications")
printf '%s' "$answer" | grep -q '"id"' || die "POST /v1/notifications through nginx: $answer"
for _ in $(seq 1 100); do
    grep -q 'Via nginx' "$scratch/record.jsonl" && grep "$token_e" "$scratch/record.jsonl" | grep -q 'Through nginx' && break
    sleep 0.1
done
grep "$token_e" "$scratch/record.jsonl" | grep -q "Bob: Through nginx" || die "the message through nginx did not arrive"
grep "$token_d" "$scratch/record.jsonl" | grep -q "Via nginx" || die "the provider notification through nginx did not arrive"
for pid in "${pids[@]:2}"; do kill -TERM "$pid"; done
for pid in "${pids[@]:2}"; do wait "$pid" || die "a service behind nginx exited with status $? on SIGTERM"; done
kill -QUIT "${pids[1]}" && wait "${pids[1]}" || true
pids=("${pids[0]}")

step "backup and restore (the guide's §13): the dump, restored into a second cluster, sends what was pending"
# Pending when the dump is taken (no daemon runs): it must go out from the restored database, once.
token_r=$(printf 'f6%.0s' {1..32})
(cd "$prefix/current" && runuser -u pushchat -- sh -c "set -a; . $etc/pushchat.env; exec bin/pushchat-api push $token_r 'Restored from the dump' production --config $etc/pushchat.json") \
    >>"$scratch/guide.log" 2>&1 || die "pushchat-api push (a notification pending in the dump)"
keys_before=$(db "SELECT count(*) FROM api_keys")
# The timer's service reaches this test's cluster through a drop-in (a cluster on another port than 5432 would need
# the same), as `systemctl edit pushchat-backup` writes it.
install -d "$scratch/etc/systemd/system/pushchat-backup.service.d"
printf '[Service]\nEnvironment=PGPORT=%s PGCLUSTER=%s\n' "$pg_port" "$PGCLUSTER" \
    >"$scratch/etc/systemd/system/pushchat-backup.service.d/cluster.conf"
# A backup from three weeks ago, past the 14 days kept: the run deletes it.
install -d -m 700 "$scratch/backups"
touch -d '21 days ago' "$scratch/backups/pushchat-20000101T000000Z.dump" "$scratch/backups/etc-pushchat-20000101T000000Z.tar.gz"
pending_at_dump=$(db "SELECT count(*) FROM push_queue WHERE time_sent IS NULL AND time_failed IS NULL")
run_guide_block backup "$repo" /dev/null
grep -q "verified with pg_restore --list" "$scratch/pushchat-backup.log" || die "the backup did not verify its dump: $(cat "$scratch/pushchat-backup.log")"
dump=$(ls -1 "$scratch/backups"/pushchat-*.dump | tail -n 1)
[ -s "$dump" ] && [ "$dump" != "$scratch/backups/pushchat-20000101T000000Z.dump" ] || die "the backup timer's service wrote no dump"
[ ! -e "$scratch/backups/pushchat-20000101T000000Z.dump" ] && [ ! -e "$scratch/backups/etc-pushchat-20000101T000000Z.tar.gz" ] \
    || die "the backup kept files older than PUSHCHAT_BACKUP_KEEP_DAYS"
[ "$(stat -c '%a %U' "$scratch/backups")" = "700 root" ] || die "the backup folder is not 0700 root"
[ "$(stat -c '%a %U' "$dump")" = "600 root" ] || die "the dump is not 0600 root"
# Listings read whole before grep -q looks: a grep that stops at its match while the lister still writes kills it
# with SIGPIPE, and pipefail then turns a match into a failure (the last stop's CI: "the dump lacks push_history's table").
settings_listing=$(tar -tzf "$(ls -1 "$scratch/backups"/etc-pushchat-*.tar.gz | tail -n 1)")
grep -q "apns.env$" <<<"$settings_listing" || die "the backup of /etc/pushchat lacks apns.env"
dump_listing=$(pg_restore --list "$dump") || die "pg_restore --list cannot read $dump"
grep -q "TABLE DATA public push_history " <<<"$dump_listing" && die "the dump holds push_history's rows (PUSHCHAT_BACKUP_HISTORY=no)"
grep -q "TABLE public push_history " <<<"$dump_listing" || die "the dump lacks push_history's table"
grep -q '^pushchat_backup_last_success_timestamp_seconds [0-9]' "$metrics/pushchat_backup.prom" || die "the backup wrote no metric"
cat "$metrics/pushchat_backup.prom" >>"$scratch/exported.metrics"

# The drill: the newest dump restored beside the service's database, checked, counted, dropped; nothing sent.
sent_before=$(wc -l <"$scratch/record.jsonl")
run_guide_block drill "$repo" /dev/null
grep -q "drill passed: $(basename "$dump") restores and fits this release: $pending_at_dump notifications pending" "$scratch/guide.log" \
    || die "the drill did not count the $pending_at_dump pending notifications: $(grep pushchat-backup "$scratch/guide.log" | tail -n 3)"
[ "$(runuser -u postgres -- psql -tAc "SELECT count(*) FROM pg_database WHERE datname = 'pushchat_drill'")" = 0 ] \
    || die "the drill left its database behind"
[ "$(wc -l <"$scratch/record.jsonl")" = "$sent_before" ] || die "something was sent during the drill"
echo "    the drill restored $(basename "$dump"): $pending_at_dump pending, nothing sent"

pg_port=$(free_port)
pg_createcluster --port "$pg_port" "$pg_version" "${cluster}r" >>"$scratch/postgres.log" 2>&1 || die "pg_createcluster (restore)"
pg_ctlcluster "$pg_version" "${cluster}r" start >>"$scratch/postgres.log" 2>&1 || die "the restore cluster did not start"
export PGPORT=$pg_port PGCLUSTER=$pg_version/${cluster}r
run_guide_block database "$repo" "$scratch/password-input"
run_guide_block restore "$repo" /dev/null
[ "$(cut -d' ' -f2 "$scratch/etc/pgbouncer/userlist.txt")" = "\"$(runuser -u postgres -- psql -tAc "SELECT rolpassword FROM pg_authid WHERE rolname = 'pushchat'")\"" ] \
    || die "the restore did not give PgBouncer the new cluster's secret for pushchat"
[ "$(db "SELECT count(*) FROM api_keys")" = "$keys_before" ] || die "the restored database lacks the keys"
[ "$(db "SELECT count(*) FROM push_deliveries WHERE device_token = '$token_r' AND time_sent IS NULL")" = 1 ] \
    || die "the restored database lacks the pending notification"
[ -n "$(db "SELECT setconfig FROM pg_db_role_setting WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = 'pushchat')")" ] \
    || die "the restore's migrate did not set the database's timeouts"
python3 - "$etc/pushchat.env" "$pg_port" <<'EOF'
import re, sys
path, port = sys.argv[1:]
lines = [line for line in open(path).read().splitlines() if not line.startswith("PUSHCHAT_DATABASE_LISTEN_URL=")]
lines = [re.sub(r"@localhost:\d+/", f"@localhost:{port}/", line) if line.startswith("PUSHCHAT_DATABASE_URL=") else line for line in lines]
open(path, "w").write("\n".join(lines) + "\n")
EOF
start_unit pushchat-push.service "$scratch/push-restored.log"
for _ in $(seq 1 100); do
    grep -q "$token_r" "$scratch/record.jsonl" && break
    sleep 0.1
done
[ "$(grep -c "$token_r" "$scratch/record.jsonl")" = 1 ] || die "the pending notification did not arrive once from the restored database"
for _ in $(seq 1 50); do
    [ "$(db "SELECT count(*) FROM push_deliveries WHERE device_token = '$token_r' AND time_sent IS NOT NULL")" = 1 ] && break
    sleep 0.1
done
[ "$(db "SELECT count(*) FROM push_deliveries WHERE device_token = '$token_r' AND time_sent IS NOT NULL")" = 1 ] \
    || die "the restored row is not stamped sent"
for pid in "${pids[@]:1}"; do kill -TERM "$pid"; done
for pid in "${pids[@]:1}"; do wait "$pid" || die "the push daemon on the restored database exited with status $?"; done
pids=("${pids[0]}")

step "upgrade from the previous release under traffic (the guide's §16), a failed upgrade, a rollback, and forward again"
# The previous release: the commit before the newest migration, built beside this one (the same build folder, so
# only its own modules compile), laid out as a release of its own (the files its own make would have installed),
# running on its own schema.
newest=$(cd "$repo/migrations" && ls ./*.sql | sort | tail -n 1)
previous=$(git -C "$repo" log -1 --format=%H --diff-filter=A -- "migrations/${newest#./}")^
previous_name=$(git -C "$repo" log -1 --format=%cd-%h --date=format:%Y%m%d%H%M%S "$previous")
mkdir -p "$scratch/previous"
git -C "$repo" archive "$previous" | tar -x -C "$scratch/previous"
echo "    the previous release: $previous_name (before ${newest#./})"
for program in pushchat-api pushchat-push pushchat-feedback; do
    (cd "$scratch/previous" && swift build -c release --static-swift-stdlib --scratch-path "$repo/.build-install" --product "$program") \
        >>"$scratch/previous-build.log" 2>&1 || die "building the previous release's $program (see previous-build.log)"
done
old=$prefix/releases/$previous_name
install -d "$old/bin" "$old/migrations" "$old/deploy/systemd" "$old/config"
for program in pushchat-api pushchat-push pushchat-feedback; do install -m 755 "$repo/.build-install/release/$program" "$old/bin/"; done
cp "$scratch/previous/migrations/"*.sql "$old/migrations/"
cp "$scratch/previous/deploy/grants.sql" "$old/deploy/"
cp "$scratch/previous/deploy/systemd/"* "$old/deploy/systemd/"
cp "$scratch/previous/config/pushchat.json" "$old/config/"
echo "$previous_name" >"$old/VERSION"
new_name=$(basename "$(readlink "$prefix/current")")
[ "$new_name" = "$release_version" ] || die "current is $new_name, not the release installed from the tarball"
ln -sfn "releases/$previous_name" "$prefix/current"
# The units as §7 copied them (the guide's upgrade block copies the new release's over them).
install -d "$scratch/etc/systemd/system"
cp "$old/deploy/systemd/"* "$scratch/etc/systemd/system/"
units_dir=$scratch/etc/systemd/system
# The previous release reads the key id from the environment only.
echo "PUSHCHAT_APNS_KEY_ID=$(sed -n 's#^PUSHCHAT_APNS_KEY_FILE=.*AuthKey_\(.*\)\.p8$#\1#p' "$etc/apns.env")" >>"$etc/apns.env"
runuser -u postgres -- dropdb pushchat || die "dropdb"
runuser -u postgres -- createdb --owner pushchat_owner pushchat || die "createdb"
(cd "$prefix/current" && runuser -u postgres -- env "PUSHCHAT_DATABASE_URL=postgres://postgres@localhost:$pg_port/pushchat?host=/run/postgresql" \
    bin/pushchat-api migrate production --role pushchat_owner) >>"$scratch/guide.log" 2>&1 || die "the previous release's migrate"
runuser -u postgres -- psql -d pushchat -v ON_ERROR_STOP=1 -qf "$old/deploy/grants.sql" >>"$scratch/guide.log" 2>&1 || die "grants"
[ "$(db "SELECT max(version) FROM schema_migrations")" -lt "$(basename "$newest" .sql | cut -d_ -f1 | sed 's/^0*//')" ] \
    || die "the previous release's schema already has ${newest#./}"
start_services -previous "the previous release"
members=6
for i in $(seq 1 $members); do
    [ "$(post --data-urlencode cmd=join --data-urlencode "udid=$(printf '%040d' "$((7000 + i))")" \
        --data-urlencode "token=$(printf '%064x' "$((0xabc000 + i))")" --data-urlencode "name=U$i" --data-urlencode code=upgrade)" = 200 ] \
        || die "join U$i on the previous release"
done
# Chat traffic all along: a message every 0.1 s, its time and answer code kept; a refused connection (000) during a
# restart wrote nothing and is not counted.
(
    n=0
    # Also ends with the test (a failure removes the scratch folder; cleanup kills it too).
    while [ -d "$scratch" ] && [ ! -e "$scratch/upgrade-done" ]; do
        n=$((n + 1))
        i=$((n % members + 1))
        code=$(post --max-time 10 --data-urlencode cmd=message --data-urlencode "udid=$(printf '%040d' "$((7000 + i))")" \
            --data-urlencode "text=upgrade $n" 2>/dev/null || true)
        echo "$(date +%s.%N) $n $code" >>"$scratch/upgrade-codes"
        sleep 0.1
    done
) &
traffic=$!
pids+=("$traffic")
# Messages accepted (200) between two times.
accepted_between() { awk -v from="$1" -v to="$2" '$1 >= from && $1 < to && $3 == 200' "$scratch/upgrade-codes" | wc -l; }
# At least MIN messages accepted in the phase from FROM to TO: an API that stayed down, or stopped taking messages
# for most of the phase, fails.
phase_accepted() {
    local phase=$1 from=$2 to=$3 min=$4 count
    count=$(accepted_between "$from" "$to")
    echo "    $phase: $count messages accepted in $(awk -v a="$from" -v b="$to" 'BEGIN { printf "%.1f", b - a }') s"
    [ "$count" -ge "$min" ] || die "only $count messages accepted $phase (at least $min expected)"
}
t_before=$(date +%s.%N)
sleep 3
t_upgrade=$(date +%s.%N)
run_guide_block upgrade "$server" /dev/null
t_upgraded=$(date +%s.%N)
[ "$(readlink "$prefix/current")" = "releases/$new_name" ] || die "pushchat-release upgrade did not point current at releases/$new_name"
grep -q "^fits: " "$scratch/guide.log" || die "migrate --check did not say fits after the upgrade"
cmp -s "$units_dir/pushchat-push.service" "$prefix/releases/$new_name/deploy/systemd/pushchat-push.service" \
    || die "the upgrade did not put the new release's units in place"
sleep 3
t_after=$(date +%s.%N)
phase_accepted "before the upgrade" "$t_before" "$t_upgrade" 15
phase_accepted "during the upgrade" "$t_upgrade" "$t_upgraded" 3
phase_accepted "after the upgrade" "$t_upgraded" "$t_after" 15

# A release whose migration fails: the upgrade stops before the switch, the running release keeps serving, nothing
# restarts; switching to it is refused too (its schema check says behind).
broken=$scratch/server/pushchat-$release_version-broken
cp -a "$server/pushchat-$release_version" "$broken"
echo "$release_version-broken" >"$broken/VERSION"
printf 'SELECT 1 / 0;\n' >"$broken/migrations/999_fails.sql"
(cd "$broken" && find . -type f ! -name SHA256SUMS | sed 's#^\./##' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
api_before=${unit_pids[pushchat-api.service]}
t_broken=$(date +%s.%N)
if run_served "$server" /dev/null "$broken/bin/pushchat-release upgrade" "$server_path" >"$scratch/broken.log" 2>&1; then
    die "pushchat-release upgrade succeeded with a failing migration"
fi
grep -q "stopped before the switch: .* still points at $new_name, which keeps serving" "$scratch/broken.log" \
    || die "the failed upgrade did not say it stopped before the switch: $(cat "$scratch/broken.log")"
[ "$(readlink "$prefix/current")" = "releases/$new_name" ] || die "the failed upgrade switched current"
[ "${unit_pids[pushchat-api.service]}" = "$api_before" ] || die "the failed upgrade restarted the API"
if run_served "$server" /dev/null "$prefix/current/bin/pushchat-release switch $release_version-broken" "$server_path" >"$scratch/broken.log" 2>&1; then
    die "pushchat-release switched to a release whose schema check says behind"
fi
grep -q "^behind: 999_fails.sql" "$scratch/broken.log" || die "the refused switch did not show the schema check: $(cat "$scratch/broken.log")"
[ "$(readlink "$prefix/current")" = "releases/$new_name" ] || die "the refused switch moved current"
sleep 1
phase_accepted "during and after the failed upgrade" "$t_broken" "$(date +%s.%N)" 5
echo "    the failed upgrade and the refused switch stopped before the switch; $new_name kept serving"

# Back to the previous release on the expanded schema (its own check says fits), then forward again.
rollback_to=$previous_name
run_guide_block rollback "$repo" /dev/null
[ "$(readlink "$prefix/current")" = "releases/$previous_name" ] || die "the rollback did not point current at the previous release"
grep -q "$new_name  (current)" "$scratch/guide.log" || die "pushchat-release list did not mark the current release"
cmp -s "$units_dir/pushchat-push.service" "$old/deploy/systemd/pushchat-push.service" || die "the rollback did not put back the previous release's units"
t_rolled_back=$(date +%s.%N)
sleep 2
phase_accepted "after the rollback" "$t_rolled_back" "$(date +%s.%N)" 8
# Forward with the newer release's own pushchat-release (the previous release has none), as the guide says.
run_served "$server" /dev/null "$prefix/releases/$new_name/bin/pushchat-release switch $new_name" "$server_path" >>"$scratch/guide.log" 2>&1 \
    || die "pushchat-release switch back to $new_name"
[ "$(readlink "$prefix/current")" = "releases/$new_name" ] || die "the roll forward did not point current at $new_name"
sleep 2
# The contract step (§16) with the new release running and the traffic still going: the keys move, nothing stops.
contract_pending=$(grep -c "^contract pending: " "$scratch/guide.log" || true)
run_guide_block contract "$repo" /dev/null
if [ "$contract_pending" -gt 0 ]; then
    [ "$(db "SELECT count(*) FROM schema_migrations")" = "$(find "$repo/migrations" -name '*.sql' | wc -l)" ] \
        || die "migrate --contract left migrations pending"
    [ "$(db "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'devices_pkey'")" = "PRIMARY KEY (app, device_token)" ] \
        || die "migrate --contract did not move the devices' key"
    echo "    migrate --contract applied under traffic: $(grep "^contract pending: " "$scratch/guide.log" | tail -n 1 | sed 's/^contract pending: \([^ (:]*\).*/\1/')"
fi
# 019_push_history_contract.sql: the running daemon notices it (within a third of its lease) and moves the rows it sends.
for _ in $(seq 1 300); do
    [ "$(db "SELECT count(*) FROM push_history WHERE payload LIKE '%: upgrade %'")" -gt 0 ] && break
    sleep 0.1
done
[ "$(db "SELECT count(*) FROM push_history WHERE payload LIKE '%: upgrade %'")" -gt 0 ] \
    || die "after migrate --contract the push daemon still stamps rows in push_queue"
echo "    after migrate --contract the running push daemon moves the rows it sends to push_history"
sleep 2
touch "$scratch/upgrade-done"
wait "$traffic"
accepted=$(awk '$3 == 200' "$scratch/upgrade-codes" | wc -l)
others=$(awk '$3 != 200 && $3 != "000"' "$scratch/upgrade-codes" | wc -l)
[ "$others" = 0 ] || die "$others messages answered neither 200 nor a refused connection: $(awk '$3 != 200' "$scratch/upgrade-codes" | head -5 | tr '\n' ' ')"
expected=$((accepted * (members - 1)))
delivered_once upgrade "$expected" "across the upgrade"
echo "    $accepted messages during the upgrade, failed upgrade, rollback and roll-forward: $expected notifications, each once"
for pid in "${pids[@]:1}"; do kill -TERM "$pid" 2>/dev/null || true; done
for pid in "${pids[@]:1}"; do wait "$pid" 2>/dev/null || true; done
pids=("${pids[0]}")

step "a standby and failover (the guide's §17): a synchronous standby, the multi-host URL, the primary crashed, the standby promoted"
# The restored cluster is db1; a new cluster on another port is db2, copied from it by the guide's blocks.
ha_primary=${cluster}r ha_primary_port=$pg_port
ha_standby=${cluster}s ha_standby_port=$(free_port)
pg_createcluster --port "$ha_standby_port" "$pg_version" "$ha_standby" >>"$scratch/postgres.log" 2>&1 || die "pg_createcluster (standby)"
pg_ctlcluster "$pg_version" "$ha_standby" start >>"$scratch/postgres.log" 2>&1 || die "the standby's cluster did not start"
ha_cluster=$ha_primary
run_guide_block standby-primary "$repo" /dev/null
printf 'CHANGE-ME\n' >"$scratch/replicator-input"
ha_cluster=$ha_standby
run_guide_block standby-copy "$repo" "$scratch/replicator-input"
for _ in $(seq 1 100); do
    [ "$(runuser -u postgres -- psql -tAc "SELECT sync_state FROM pg_stat_replication")" = sync ] && break
    sleep 0.2
done
[ "$(runuser -u postgres -- psql -tAc "SELECT sync_state FROM pg_stat_replication")" = sync ] \
    || die "the standby does not stream synchronously: $(runuser -u postgres -- psql -tAc "SELECT application_name, state, sync_state FROM pg_stat_replication")"
# The guide's URL with both hosts; the clusters' certificate is Debian's snakeoil for this machine, not db1 and db2,
# so the URL keeps the example's TLS setting (as the single-host URL above) in place of verify-full.
ha_url=$(guide_block standby-url | grep '^PUSHCHAT_DATABASE_URL=')
[ -n "$ha_url" ] || die "the guide's standby-url block has no PUSHCHAT_DATABASE_URL"
# The password is the one the file holds now (§10 rotated it).
python3 - "$etc/pushchat.env" "$ha_url" "$ha_primary_port" "$ha_standby_port" <<'EOF'
import re, sys
path, line, primary, standby = sys.argv[1:]
lines = open(path).read().splitlines()
current = next(l for l in lines if l.startswith("PUSHCHAT_DATABASE_URL="))
password = re.search(r"://pushchat:([^@]*)@", current).group(1)
adapted = (line.replace("pushchat:PASSWORD@", f"pushchat:{password}@").replace("@db1:5432,db2:5432/", f"@localhost:{primary},localhost:{standby}/")
    .replace("sslmode=verify-full&sslrootcert=/etc/pushchat/db-ca.crt&", ""))
if "db1" in adapted or "db2" in adapted or "PASSWORD" in adapted:
    sys.exit(f"the guide's URL changed shape: {line}")
lines = [adapted if l.startswith("PUSHCHAT_DATABASE_URL=") else l for l in lines]
open(path, "w").write("\n".join(lines) + "\n")
EOF
grep -q "^PUSHCHAT_DATABASE_URL='postgres://pushchat:[^@]*@localhost:$ha_primary_port,localhost:$ha_standby_port/pushchat?target_session_attrs=read-write" \
    "$etc/pushchat.env" || die "pushchat.env does not hold the multi-host URL: $(grep -c DATABASE_URL "$etc/pushchat.env") lines"
start_services -ha "on the multi-host URL"
grep -q "Database host: localhost:$ha_primary_port (read-write, of 2)" "$scratch/api-ha.log" || die "the API did not say it uses db1"
ha_join() {
    [ "$(post --data-urlencode cmd=join --data-urlencode "udid=$1" --data-urlencode "token=$2" --data-urlencode "name=$3" --data-urlencode code=failover)" = 200 ] \
        || die "join $3 on the multi-host URL"
}
ha_join 6666666666666666666666666666666666666666 "$(printf 'c6%.0s' {1..32})" Fay
ha_join 7777777777777777777777777777777777777777 "$(printf 'c7%.0s' {1..32})" Gus
[ "$(post --data-urlencode cmd=message --data-urlencode udid=6666666666666666666666666666666666666666 --data-urlencode 'text=standby before the crash')" = 200 ] \
    || die "a message on the multi-host URL"
delivered_once standby 1 "before the crash"
# The crash: db1 stops at once (no shutdown checkpoint), as a machine lost; then the guide's promotion on db2.
pg_ctlcluster "$pg_version" "$ha_primary" stop -m immediate >>"$scratch/postgres.log" 2>&1 || die "crashing the primary"
t_crash=$(date +%s.%N)
ha_cluster=$ha_standby
export PGPORT=$ha_standby_port PGCLUSTER=$pg_version/$ha_standby
run_guide_block promote "$repo" /dev/null
t_promoted=$(date +%s.%N)
promoted_ok=0 t_back=""
for n in $(seq 1 200); do
    code=$(post --max-time 5 --data-urlencode cmd=message --data-urlencode udid=6666666666666666666666666666666666666666 --data-urlencode "text=promoted $n" || true)
    if [ "$code" = 200 ]; then
        promoted_ok=$((promoted_ok + 1))
        t_back=${t_back:-$(date +%s.%N)}
        [ "$promoted_ok" -ge 5 ] && break
    fi
    sleep 0.1
done
[ -n "$t_back" ] || die "the API never answered 200 after the promotion"
switch=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t_promoted" "$t_back")
crash_to_ok=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t_crash" "$t_back")
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 10 else 1)" "$switch" || die "the API answered 200 again only $switch s after the promotion"
delivered_once promoted "$promoted_ok" "after the promotion"
[ "$(db "SELECT count(*) FROM push_deliveries WHERE payload LIKE '%: standby %'")" = 1 ] || die "the message before the crash is not on the promoted standby"
grep -q "Database host: localhost:$ha_standby_port (read-write, of 2)" "$scratch/api-ha.log" || die "the API did not say it moved to db2"
unit pushchat-feedback.service >"$scratch/feedback-ha.log" 2>&1 || die "the feedback job failed on the multi-host URL after the switch"
grep -q "Feedback:" "$scratch/feedback-ha.log" || die "the feedback job logged no summary after the switch"
for pid in "${pids[@]:1}"; do kill -TERM "$pid"; done
for pid in "${pids[@]:1}"; do wait "$pid" || die "a service exited with status $? on SIGTERM after the failover"; done
pids=("${pids[0]}")
echo "    the API answered 200 again $crash_to_ok s after the crash, $switch s after the promotion; no restart; every message once"

step "monitoring: promtool checks deploy/prometheus.yml and deploy/alerts.yml, and runs deploy/alerts-test.yml"
command -v promtool >/dev/null || die "promtool is missing (scripts/test.sh installs Debian's prometheus)"
mkdir -p "$scratch/prometheus"
cp deploy/alerts.yml "$scratch/prometheus/pushchat-alerts.yml"
sed "s#/etc/prometheus/pushchat-alerts.yml#$scratch/prometheus/pushchat-alerts.yml#" deploy/prometheus.yml >"$scratch/prometheus/prometheus.yml"
promtool check rules "$scratch/prometheus/pushchat-alerts.yml" >"$scratch/promtool.log" 2>&1 || die "promtool check rules: $(cat "$scratch/promtool.log")"
promtool check config "$scratch/prometheus/prometheus.yml" >"$scratch/promtool.log" 2>&1 || die "promtool check config: $(cat "$scratch/promtool.log")"
# The rules' unit tests (series in, alerts out), at least one per rule.
cp deploy/alerts-test.yml "$scratch/prometheus/alerts-test.yml"
sed -i "s#^  - alerts.yml#  - pushchat-alerts.yml#" "$scratch/prometheus/alerts-test.yml"
promtool test rules "$scratch/prometheus/alerts-test.yml" >"$scratch/promtool.log" 2>&1 || die "promtool test rules: $(cat "$scratch/promtool.log")"
for rule in $(grep -o 'alert: PushChat[A-Za-z]*' deploy/alerts.yml | cut -d' ' -f2); do
    grep -q "alertname: $rule\$" deploy/alerts-test.yml || die "deploy/alerts-test.yml has no test of $rule"
done
# Every PushChat metric an alert reads is one the programs export (a renamed metric would silence its alert).
for name in $(grep -o 'pushchat_[a-z_]*' deploy/alerts.yml | sort -u); do
    grep -q "^$name[{ ]" "$scratch/exported.metrics" || die "deploy/alerts.yml reads $name, which no program exported"
done

step "systemd-analyze verify"
command -v systemd-analyze >/dev/null || die "systemd-analyze is missing (scripts/test.sh installs Debian's systemd)"
units=$scratch/units
mkdir -p "$units"
for file in deploy/systemd/*.service deploy/systemd/*.timer; do
    sed -e "s#/opt/pushchat#$prefix#g" -e "s#/etc/pushchat#$etc#g" -e "s#/var/lib/prometheus/node-exporter#$metrics#g" \
        "$file" >"$units/$(basename "$file")"
done
output=$(cd "$units" && systemd-analyze verify ./*.service ./*.timer 2>&1) || die "systemd-analyze verify: $output"
# It reports unknown or malformed settings without failing: any remark fails the test.
[ -z "$output" ] || die "systemd-analyze verify: $output"

echo "==> deploy-test: passed in $(($(date +%s) - start)) s"
