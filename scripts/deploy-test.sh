#!/usr/bin/env bash
# The deployment test: deploy/README.md followed to the letter on this machine, into a scratch folder, the way an
# operator deploys on Debian, with the local APNs simulator standing in for Apple.
#
#   1. the guide's command blocks marked <!-- deploy-test: NAME --> run as written (sudo -u U → runuser, paths under
#      the scratch folder): make release, make install, the service user, /etc/pushchat, the key, the database role
#      and database (createuser --pwprompt, answered), migrate, the metrics folder;
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
#   9. the guide's backup block, and its restore block into a second cluster: what was pending in the dump is sent;
#  10. promtool on deploy/prometheus.yml and deploy/alerts.yml, whose metrics the programs exported during the test,
#      and the rules' unit tests (deploy/alerts-test.yml, one or more per rule);
#  11. systemd-analyze verify on the units (required: scripts/test.sh installs Debian's systemd when missing).
#
# Needs root (it creates the users pushchat and pushchat-api and a PostgreSQL cluster; all are removed at the end
# unless they existed). Run by `scripts/test.sh` and CI; takes a few minutes plus the release build.
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
maps=(--map "/opt/pushchat=$prefix" --map "/etc/pushchat=$etc" --map "/var/lib/prometheus/node-exporter=$metrics")
pg_version=$(basename "$(dirname "$(pg_bindir)")")
cluster=deploytest$$
created_users=()
pids=()

step() { echo "==> deploy-test: $*"; }
die() {
    echo "deploy-test: FAILED: $*" >&2
    for log in "$scratch"/*.log; do [ -f "$log" ] && { echo "--- $log" >&2; tail -n 30 "$log" >&2; }; done
    exit 1
}

cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    # SIGINT: PgBouncer's fast shutdown (SIGTERM waits for its clients), as Debian's unit stops it.
    [ -n "$bouncer_pid" ] && kill -INT "$bouncer_pid" 2>/dev/null
    pg_dropcluster --stop "$pg_version" "$cluster" >/dev/null 2>&1 || true
    pg_dropcluster --stop "$pg_version" "${cluster}r" >/dev/null 2>&1 || true
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
    local name=$1 dir=$2 input=$3 line command
    local lines
    lines=$(guide_block "$name")
    [ -n "$lines" ] || die "deploy/README.md has no block marked deploy-test: $name"
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        command=$(printf '%s\n' "$line" | sed -e "s#/opt/pushchat#$prefix#g" -e "s#/etc/pushchat#$etc#g" \
            -e "s#/var/lib/prometheus/node-exporter#$metrics#g" -e "s#localhost:5432/#localhost:${pg_port:-5432}/#g" \
            -e "s#/etc/pgbouncer#$scratch/etc/pgbouncer#g" -e "s#ABC123DEFG#DEVKEY0001#g" -e "s#DEF123GHIJ#DEVTEAM001#g" \
            -e "s#/var/backups/pushchat#$scratch/backups#g" -e "s#/etc/systemd/system/#$scratch/etc/systemd/system/#g" \
            -e "s#20261101120000-abc1234#${rollback_to:-}#g" \
            -e 's#sudo -u \([a-z_-]*\) #runuser -u \1 -- #g' -e 's#sudo ##g')
        case "$command" in
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
        "systemctl restart pgbouncer")
            # No systemd here: PgBouncer as Debian's unit runs it (User=postgres, the ini as its argument).
            start_pgbouncer
            echo "    (guide) $line   [pgbouncer started as postgres]"
            continue
            ;;
        esac
        echo "    (guide) $line"
        (cd "$dir" && setsid -w bash -c "$command" <"$input") >>"$scratch/guide.log" 2>&1 \
            || die "the guide's line failed: $line (see guide.log)"
    done <<<"$lines"
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

step "install (the guide's §1: make release, make install, the user, /etc/pushchat)"
run_guide_block install "$repo" /dev/null
for program in pushchat-api pushchat-push pushchat-feedback; do
    [ -x "$prefix/current/bin/$program" ] || die "make install did not install bin/$program"
    if ldd "$prefix/current/bin/$program" | grep -q "/opt/swift\|libswiftCore"; then die "$program needs the toolchain's runtime"; fi
done
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
http2_port=$(free_port)
# Built by `make release` beside the programs it installs.
simulator=$(make -s -C "$repo" --no-print-directory release-bin-path)/pushchat-apns-sim
[ -x "$simulator" ] || die "the simulator was not built by make release ($simulator)"
# A copy runs: the upgrade below builds into the same folder while the simulator keeps running.
cp "$simulator" "$scratch/pushchat-apns-sim"
simulator=$scratch/pushchat-apns-sim
"$simulator" --certs "$certs" --gateway-port 0 --feedback-port 0 --http2-port "$http2_port" --no-status \
    --topic com.example.PushChat --topic com.example.PushChat.beta --unregistered "$scratch/unregistered.txt" --record "$scratch/record.jsonl" \
    --fcm-port "$fcm_port" --fcm-service-account "$certs/fcm-service-account.json" \
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
run_guide_block install "$repo" /dev/null
[ "$(sha256sum "$etc/pushchat.env" "$etc/apns.env" "$etc/pushchat.json")" = "$filled" ] || die "running §1 again changed the settings"
{
    echo "# deploy-test: the local simulator stands in for Apple"
    echo "PUSHCHAT_APNS_HOST=127.0.0.1:$http2_port"
    echo "PUSHCHAT_APNS_CA_FILE=$etc/apns-ca.pem"
    echo "PUSHCHAT_FCM_HOST=127.0.0.1:$fcm_port"
    echo "PUSHCHAT_FCM_CA_FILE=$etc/apns-ca.pem"
} >>"$etc/pushchat.env"

step "Android phones (the guide's §3): the Firebase service account, the sender's alone"
cp "$certs/fcm-service-account.json" "$keys/"
run_guide_block android "$keys" /dev/null
[ "$(stat -c '%a %U %G' "$etc/fcm-service-account.json")" = "600 pushchat pushchat" ] || die "the service account is not 0600 pushchat:pushchat"
grep -q "^PUSHCHAT_FCM_SERVICE_ACCOUNT_FILE=$etc/fcm-service-account.json$" "$etc/apns.env" || die "apns.env does not name the service account"

step "migrate as the owner, the services' grants (the guide's §4) and the metrics folder (§6)"
run_guide_block migrate "$repo" /dev/null
grep -q "001" "$scratch/guide.log" || die "migrate --status listed nothing"
run_guide_block metrics "$repo" /dev/null
run_guide_block keys "$repo" /dev/null
api_key=$(grep -E '^pck_[A-Za-z0-9_-]{43}$' "$scratch/guide.log" | tail -n 1)
[ -n "$api_key" ] || die "keys create printed no key on its last line"
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
if psql "$service_url" -v ON_ERROR_STOP=1 -qc "INSERT INTO api_keys (name, key_hash) VALUES ('intruder', 'x')" >/dev/null 2>&1 \
    || psql "$service_url" -v ON_ERROR_STOP=1 -qc "UPDATE api_keys SET scopes = '{send,broadcast}'" >/dev/null 2>&1; then
    die "the services' role may write api_keys"
fi

# A unit's ExecStart as systemd runs it: in the foreground (a oneshot's run), or started (a service: its pid kept).
# The unit files: the installed release's, or (the upgrade) the copies in /etc/systemd/system the guide makes.
units_dir=$prefix/current/deploy/systemd
declare -A unit_pids=()
unit() { python3 "$repo/scripts/lib/unit.py" "${maps[@]}" "$units_dir/$1"; }
start_unit() {
    python3 "$repo/scripts/lib/unit.py" "${maps[@]}" "$units_dir/$1" >"$2" 2>&1 &
    pids+=($!)
    unit_pids[$1]=$!
}
# `systemctl restart UNIT` for a service started by start_unit: SIGTERM, status 0, started again (a new log).
restart_unit() {
    local name=$1.service pid=${unit_pids[$1.service]:-}
    [ -n "$pid" ] || die "systemctl restart $1: the unit is not running"
    kill -TERM "$pid"
    wait "$pid" || die "$1 exited with status $? on systemctl restart"
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
    curl -fsS http://127.0.0.1:44447/readyz >/dev/null || die "the API is not ready ($2)"
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
[ "$(post --data-urlencode cmd=message --data-urlencode udid=4444444444444444444444444444444444444444 --data-urlencode 'text=Hello Android')" = 200 ] || die "message to the mixed room"
for _ in $(seq 1 100); do
    grep -q "$token_f" "$scratch/record.jsonl" 2>/dev/null && break
    sleep 0.1
done
grep "$token_f" "$scratch/record.jsonl" | grep '"format":"fcm"' | grep -q 'Eve: Hello Android' || die "the message did not arrive at the simulator's FCM (see push.log)"
grep -q 'Connection OK (FCM)' "$scratch/push.log" || die "the push daemon logged no FCM connection"
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
unit pushchat-feedback.service >"$scratch/feedback.log" 2>&1 || die "the feedback job failed"
grep -q "Feedback:" "$scratch/feedback.log" || die "the feedback job logged no summary"
[ "$(db "SELECT count(*) FROM active_users")" = 2 ] || die "the feedback job did not delete the unregistered device"
[ -s "$metrics/pushchat_feedback.prom" ] || die "no metrics file"
grep -q '^pushchat_feedback_success 1' "$metrics/pushchat_feedback.prom" || die "the metrics file does not say success"
[ "$(stat -c '%a' "$metrics/pushchat_feedback.prom")" = 644 ] || die "node_exporter cannot read the metrics file"
unit pushchat-prune.service >"$scratch/prune.log" 2>&1 || die "the prune job failed"
grep -q "rows older than 7d deleted" "$scratch/prune.log" || die "the prune job logged nothing"

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
for pid in "${pids[@]:1}"; do kill -TERM "$pid"; done
for pid in "${pids[@]:1}"; do wait "$pid" || die "a service behind PgBouncer exited with status $? on SIGTERM"; done
pids=("${pids[0]}")

step "behind nginx (Debian's package, deploy/nginx-pushchat.conf as written but for the certificate and port)"
command -v nginx >/dev/null || die "nginx is not installed (scripts/test.sh installs Debian's)"
# The guide's settings for a proxy in front, in the environment file.
printf '%s\n' PUSHCHAT_API_HOST=127.0.0.1 PUSHCHAT_API_TRUSTED_PROXIES=127.0.0.1/32 PUSHCHAT_API_MAX_CONNECTIONS_PER_IP=0 \
    >>"$etc/pushchat.env"
nginx_dir=$scratch/nginx
nginx_port=$(free_port)
mkdir -p "$nginx_dir"
sed -e "s#listen 443 ssl;#listen 127.0.0.1:$nginx_port ssl;#" -e "s#listen \[::\]:443 ssl;#listen [::1]:$nginx_port ssl;#" \
    -e "s#server_name push.example.com;#server_name localhost;#" \
    -e "s#/etc/letsencrypt/live/push.example.com/fullchain.pem#$certs/server.pem#" \
    -e "s#/etc/letsencrypt/live/push.example.com/privkey.pem#$certs/server-key.pem#" \
    "$prefix/current/deploy/nginx-pushchat.conf" >"$nginx_dir/pushchat.conf"
grep -q "listen 127.0.0.1:$nginx_port ssl;" "$nginx_dir/pushchat.conf" || die "nginx-pushchat.conf has no 'listen 443 ssl;'"
# Debian's nginx.conf reduced to what a site needs: the site is included in http {} as sites-enabled/ would be.
cat >"$nginx_dir/nginx.conf" <<EOF
pid $nginx_dir/nginx.pid;
error_log $nginx_dir/error.log;
events {}
http {
    access_log $nginx_dir/access.log;
    include /etc/nginx/mime.types;
    client_body_temp_path $nginx_dir/body;
    proxy_temp_path $nginx_dir/proxy;
    include $nginx_dir/pushchat.conf;
}
EOF
nginx -t -c "$nginx_dir/nginx.conf" >"$scratch/nginx.log" 2>&1 || die "nginx refuses the example: $(cat "$scratch/nginx.log")"
nginx -c "$nginx_dir/nginx.conf" -g 'daemon off;' >>"$scratch/nginx.log" 2>&1 &
pids+=($!)
start_unit pushchat-api.service "$scratch/api-nginx.log"
start_unit pushchat-push.service "$scratch/push-nginx.log"
https() { curl -sS --cacert "$certs/ca.pem" "$@"; }
site=https://localhost:$nginx_port
for _ in $(seq 1 100); do https -f "$site/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
https -f "$site/readyz" >/dev/null || die "/readyz through nginx"
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
run_guide_block backup "$repo" /dev/null
[ -s "$scratch/backups/pushchat.dump" ] || die "the guide's backup block wrote no dump"
tar -tzf "$scratch/backups/etc-pushchat.tar.gz" | grep -q "apns.env$" || die "the backup of /etc/pushchat lacks apns.env"
pg_port=$(free_port)
pg_createcluster --port "$pg_port" "$pg_version" "${cluster}r" >>"$scratch/postgres.log" 2>&1 || die "pg_createcluster (restore)"
pg_ctlcluster "$pg_version" "${cluster}r" start >>"$scratch/postgres.log" 2>&1 || die "the restore cluster did not start"
export PGPORT=$pg_port PGCLUSTER=$pg_version/${cluster}r
run_guide_block database "$repo" "$scratch/password-input"
run_guide_block restore "$repo" /dev/null
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

step "upgrade from the previous release under traffic (the guide's §16), a rollback, and forward again"
# The previous release: the commit before the newest migration, built beside this one (the same build folder, so
# only its own modules compile), installed as a release of its own, running on its own schema.
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
install -d "$old/bin" "$old/migrations" "$old/deploy"
for program in pushchat-api pushchat-push pushchat-feedback; do install -m 755 "$repo/.build-install/release/$program" "$old/bin/"; done
cp "$scratch/previous/migrations/"*.sql "$old/migrations/"
cp "$scratch/previous/deploy/grants.sql" "$old/deploy/"
new_name=$(basename "$(readlink "$prefix/current")")
ln -sfn "releases/$previous_name" "$prefix/current"
# The units as §7 copied them (the guide's upgrade block copies the new release's over them).
install -d "$scratch/etc/systemd/system"
cp "$prefix/releases/$new_name/deploy/systemd/"* "$scratch/etc/systemd/system/"
units_dir=$scratch/etc/systemd/system
# The previous release reads the key id from the environment only.
echo "PUSHCHAT_APNS_KEY_ID=DEVKEY0001" >>"$etc/apns.env"
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
# Chat traffic all along: a message every 0.1 s, its answer code kept; a refused connection (000) during a restart
# wrote nothing and is not counted.
(
    n=0
    # Also ends with the test (a failure removes the scratch folder; cleanup kills it too).
    while [ -d "$scratch" ] && [ ! -e "$scratch/upgrade-done" ]; do
        n=$((n + 1))
        i=$((n % members + 1))
        code=$(post --max-time 10 --data-urlencode cmd=message --data-urlencode "udid=$(printf '%040d' "$((7000 + i))")" \
            --data-urlencode "text=upgrade $n" 2>/dev/null || true)
        echo "$n $code" >>"$scratch/upgrade-codes"
        sleep 0.1
    done
) &
traffic=$!
pids+=("$traffic")
sleep 2
run_guide_block upgrade "$repo" /dev/null
[ "$(readlink "$prefix/current")" = "releases/$new_name" ] || die "make install did not point current at releases/$new_name"
grep -q "^fits: " "$scratch/guide.log" || die "migrate --check did not say fits after the upgrade"
sleep 2
# Back to the previous release on the expanded schema, then forward again, traffic still going.
rollback_to=$previous_name
run_guide_block rollback "$repo" /dev/null
[ "$(readlink "$prefix/current")" = "releases/$previous_name" ] || die "the rollback did not point current at the previous release"
sleep 2
ln -sfn "releases/$new_name" "$prefix/current"
restart_unit pushchat-api
restart_unit pushchat-push
sleep 2
# The contract step (§16) with the new release running and the traffic still going: the keys move, nothing stops.
contract_pending=$(grep -c "^contract pending: " "$scratch/guide.log" || true)
run_guide_block contract "$repo" /dev/null
if [ "$contract_pending" -gt 0 ]; then
    [ "$(db "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'devices_pkey'")" = "PRIMARY KEY (app, device_token)" ] \
        || die "migrate --contract did not move the devices' key"
    echo "    migrate --contract applied under traffic: devices and invalid_tokens keyed by (app, device_token)"
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
accepted=$(awk '$2 == 200' "$scratch/upgrade-codes" | wc -l)
others=$(awk '$2 != 200 && $2 != "000"' "$scratch/upgrade-codes" | wc -l)
[ "$others" = 0 ] || die "$others messages answered neither 200 nor a refused connection: $(awk '$2 != 200' "$scratch/upgrade-codes" | head -5 | tr '\n' ' ')"
expected=$((accepted * (members - 1)))
delivered_once upgrade "$expected" "across the upgrade"
echo "    $accepted messages during the upgrade, rollback and roll-forward: $expected notifications, each once"
for pid in "${pids[@]:1}"; do kill -TERM "$pid" 2>/dev/null || true; done
for pid in "${pids[@]:1}"; do wait "$pid" 2>/dev/null || true; done
pids=("${pids[0]}")

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
# The certificate's expiry is exported with certificate authentication only (this test uses a .p8 key):
# PushMetricsTests checks it.
for name in $(grep -o 'pushchat_[a-z_]*' deploy/alerts.yml | sort -u); do
    [ "$name" = pushchat_apns_certificate_expiry_seconds ] && continue
    # Counted only when Apple or Google refuses the credentials, which this test does not make happen: HTTP2Tests
    # (refusedCredentialsKeepRowsQueued) checks it is exported then.
    [ "$name" = pushchat_credentials_refused_total ] && continue
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
