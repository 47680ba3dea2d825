#!/usr/bin/env bash
# Runs PushChat Server locally on an embedded default: a throwaway PostgreSQL cluster under .local/ (kept between
# runs; `--fresh` starts from an empty one), migrated; development certificates; the local APNs simulator; the API
# server and the push daemon in development mode; the feedback job once, then every 5 minutes
# (PUSHCHAT_FEEDBACK_EVERY seconds). Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/postgres.sh

fresh=false
for argument in "$@"; do
    case "$argument" in
        --fresh) fresh=true ;;
        *) echo "usage: scripts/run.sh [--fresh]" >&2; exit 2 ;;
    esac
done

cluster="$PWD/.local/run-postgres"
children=()
stopping=false
stop_all() {
    $stopping && return
    stopping=true
    # A second Ctrl-C or TERM while stopping must not cut this short: PostgreSQL would be left running.
    trap '' INT TERM
    echo
    echo "==> stopping"
    for pid in "${children[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${children[@]}"; do wait "$pid" 2>/dev/null || true; done
    pg_stop "$cluster"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

pg_ensure_installed

echo "==> building (swift build)"
swift build
bin=$(swift build --show-bin-path)

if $fresh; then rm -rf "$cluster"; fi
echo "==> starting PostgreSQL (cluster in .local/run-postgres)"
pg_start "$cluster"
pg_create_database "$PG_PORT" pushchat_development
export APPLICATION_ENV=development
export PUSHCHAT_DATABASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/pushchat_development?sslmode=disable"

echo "==> migrating"
"$bin/pushchat-api" migrate development

# The usual port, or a free one when it is taken.
port_or_free() {
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
        local port
        port=$(pg_free_port)
        echo "    port $1 is busy: using $port instead" >&2
        echo "$port"
    else
        echo "$1"
    fi
}

wait_for_port() {
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    echo "nothing listens on port $1" >&2
    return 1
}

echo "==> development certificates (.local/certs)"
export PUSHCHAT_DEV_PASSPHRASE=${PUSHCHAT_DEV_PASSPHRASE:-pushchat}
./deploy/dev-certs.sh .local/certs
export PUSHCHAT_APNS_PASSPHRASE=$PUSHCHAT_DEV_PASSPHRASE

# Two apps, so a newcomer sees how several share one server: the default one (the configuration below, the chat API)
# and beta, a sandbox build with its own bundle id and signing key (BETAKEY001), sent over HTTP/2.
echo "==> apps: default (com.example.PushChat) and beta (com.example.PushChat.beta, sandbox, HTTP/2)"
beta=(--bundle-id com.example.PushChat.beta --environment sandbox --key-file "$PWD/.local/certs/AuthKey_BETAKEY001.p8" --team-id DEVTEAM001)
"$bin/pushchat-api" apps add beta development "${beta[@]}" >/dev/null 2>&1 \
    || "$bin/pushchat-api" apps update beta development "${beta[@]}" >/dev/null

gateway_port=$(port_or_free 2195)
feedback_port=$(port_or_free 2196)
status_port=$(port_or_free 8095)
http2_port=$(port_or_free 2197)
fcm_port=$(port_or_free 2198)
webpush_port=$(port_or_free 2199)
# The development service account, its token URI pointing at the simulator's port.
sed "s#https://127.0.0.1:[0-9]*/token#https://127.0.0.1:$fcm_port/token#" .local/certs/fcm-service-account.json >.local/fcm-service-account.json
chmod 600 .local/fcm-service-account.json
mkdir -p log
# Delivery events: a webhook for beta's notifications, received (signatures checked) by the simulator's page.
echo "==> webhook: beta's delivery events to the simulator's page (http://127.0.0.1:$status_port/webhooks)"
export PUSHCHAT_WEBHOOK_PRIVATE_HOSTS="127.0.0.1:$status_port"
"$bin/pushchat-api" webhooks remove simulator development >/dev/null 2>&1 || true
webhook_secret=$("$bin/pushchat-api" webhooks add simulator development --app beta --url "http://127.0.0.1:$status_port/webhooks" \
    --events notification.sent,notification.failed,device.unregistered,notification.completed | tail -n 1)
echo "==> starting the APNs and FCM simulator (record: log/apns-sim-notifications.jsonl)"
"$bin/pushchat-apns-sim" --certs .local/certs --gateway-port "$gateway_port" --feedback-port "$feedback_port" \
    --http2-port "$http2_port" --status-port "$status_port" --record log/apns-sim-notifications.jsonl \
    --fcm-port "$fcm_port" --fcm-service-account .local/fcm-service-account.json --webhook-secret "$webhook_secret" \
    --webpush-port "$webpush_port" &
children+=($!)
wait_for_port "$gateway_port"
export PUSHCHAT_APNS_GATEWAY="127.0.0.1:$gateway_port" PUSHCHAT_APNS_FEEDBACK="127.0.0.1:$feedback_port"
# The HTTP/2 API too (PUSHCHAT_APNS_TRANSPORT=http2 ./scripts/run.sh): token authentication with the development key.
export PUSHCHAT_APNS_HOST="127.0.0.1:$http2_port" PUSHCHAT_APNS_TOPIC=${PUSHCHAT_APNS_TOPIC:-com.example.PushChat}
export PUSHCHAT_APNS_KEY_FILE=${PUSHCHAT_APNS_KEY_FILE:-.local/certs/AuthKey_DEVKEY0001.p8}
export PUSHCHAT_APNS_KEY_ID=${PUSHCHAT_APNS_KEY_ID:-DEVKEY0001} PUSHCHAT_APNS_TEAM_ID=${PUSHCHAT_APNS_TEAM_ID:-DEVTEAM001}
# Android: FCM through the simulator's Google side, with the development service account.
export PUSHCHAT_FCM_SERVICE_ACCOUNT_FILE="$PWD/.local/fcm-service-account.json" PUSHCHAT_FCM_HOST="127.0.0.1:$fcm_port"
export PUSHCHAT_FCM_CA_FILE="$PWD/.local/certs/ca.pem"
# Browsers: Web Push through the simulator's push service, signed with a development VAPID key (made once).
[ -s .local/vapid.pem ] || "$bin/pushchat-api" webpush generate-key .local/vapid.pem >/dev/null
vapid_public=$("$bin/pushchat-api" webpush public-key .local/vapid.pem)
export PUSHCHAT_WEBPUSH_VAPID_KEY_FILE="$PWD/.local/vapid.pem" PUSHCHAT_WEBPUSH_SUBJECT=mailto:dev@example.com
export PUSHCHAT_WEBPUSH_PRIVATE_HOSTS="127.0.0.1:$webpush_port" PUSHCHAT_WEBPUSH_CA_FILE="$PWD/.local/certs/ca.pem"

api_port=$(port_or_free "${PUSHCHAT_API_PORT:-44447}")
export PUSHCHAT_API_HOST=${PUSHCHAT_API_HOST:-127.0.0.1} PUSHCHAT_API_PORT=$api_port
api_metrics=$(port_or_free "${PUSHCHAT_API_METRICS_PORT:-44449}")
export PUSHCHAT_API_METRICS_PORT=$api_metrics

echo "==> starting the API server (log: log/api_development.log)"
"$bin/pushchat-api" serve development &
children+=($!)

push_status=$(port_or_free "${PUSHCHAT_PUSH_STATUS_PORT:-44448}")
export PUSHCHAT_PUSH_STATUS_PORT=$push_status
echo "==> starting the push daemon (log: log/push_development.log)"
"$bin/pushchat-push" development &
children+=($!)

feedback_every=${PUSHCHAT_FEEDBACK_EVERY:-300}
echo "==> running the feedback job now and every ${feedback_every}s (log: log/feedback_development.log)"
(
    trap 'exit 0' TERM
    while true; do
        "$bin/pushchat-feedback" development >/dev/null || true
        sleep "$feedback_every" & wait $!
    done
) &
children+=($!)

wait_for_port "$api_port"

api="http://127.0.0.1:$api_port"
# An Android phone in the demo room, so a message there shows on an iPhone and an Android lock screen.
android_token="dKx3dEmo0android:APA91bH$(printf 'Q%.0s' {1..140})"
curl -s -o /dev/null -d cmd=join -d udid="$(printf '%040d' 9)" -d token="$android_token" -d name=Dee -d code=demo -d platform=fcm "$api/api.php" \
    || echo "    (could not join the demo Android phone)" >&2
# And a browser: it subscribes on the simulator's page (its push service) with the server's VAPID key, then joins.
wait_for_port "$status_port"
subscription=$(curl -s -X POST -H 'Content-Type: application/json' \
    --data "{\"app\":\"PushChat\",\"application_server_key\":\"$vapid_public\"}" "http://127.0.0.1:$status_port/browsers")
curl -s -o /dev/null --data-urlencode cmd=join --data-urlencode udid="$(printf '%040d' 10)" --data-urlencode "token=$subscription" \
    --data-urlencode name=Bea --data-urlencode code=demo --data-urlencode platform=web "$api/api.php" \
    || echo "    (could not join the demo browser)" >&2
cat <<TXT

PushChat Server is running (development mode).

  API            $api/api.php
  Test forms     $api/  (join two fake devices with the same secret code, then send a message)
                 $api/test/api_join.html   $api/test/api_message.html   (2011 app: udid)
                 $api/test/api_join_2013.html   $api/test/api_message_2013.html   (2013 app: user_id)
  Database check $api/test/database
  Arrived        http://127.0.0.1:$status_port/  (the simulator: a lock screen per iPhone, Android phone and browser, updating
                 live; the same as JSON at /status.json)
  Android        Dee's Android phone is in the room "demo" (platform=fcm): messages there go out over FCM too
  Browser        Bea's browser is in the room "demo" (platform=web): messages there go out over Web Push too,
                 encrypted for it and signed with .local/vapid.pem
                 log/apns-sim-notifications.jsonl (every notification the simulator accepted)
  Apps           export PUSHCHAT_DATABASE_URL='$PUSHCHAT_DATABASE_URL'   (in another shell first: the commands read it)
                 $bin/pushchat-api apps list development   (default: the chat API; beta: its own key and topic)
                 KEY=\$($bin/pushchat-api keys create beta-\$RANDOM development --app beta --scope send --scope broadcast --scope devices:write | tail -n 1)
                 curl -H "Authorization: Bearer \$KEY" -H 'Content-Type: application/json' -d '{"token": "$(printf 'be%.0s' {1..32})"}' $api/v1/devices
                 curl -H "Authorization: Bearer \$KEY" -H 'Content-Type: application/json' -d '{"to": {"all": true}, "aps": {"alert": "Beta: hello"}}' $api/v1/notifications
  Webhook        beta's delivery events (sent, failed, unregistered, completed) on the simulator's page, signed and
                 checked: $bin/pushchat-api webhooks list development
  Metrics        http://127.0.0.1:$api_metrics/metrics (API)   http://127.0.0.1:$push_status/metrics (push daemon; also /readyz)
  psql           psql '$PUSHCHAT_DATABASE_URL'
                 SELECT * FROM active_users;  SELECT message_id, status, device_token, payload, time_sent FROM push_deliveries;
  Logs           log/api_development.log  log/push_development.log  log/feedback_development.log

From a shell:
  curl -d cmd=join -d udid=$(printf '%040d' 1) -d token=$(printf 'ab%.0s' {1..32}) -d name=Ann -d code=demo $api/api.php
  curl -d cmd=join -d udid=$(printf '%040d' 2) -d token=$(printf 'cd%.0s' {1..32}) -d name=Bob -d code=demo $api/api.php
  curl -d cmd=message -d udid=$(printf '%040d' 1) -d text=Hello $api/api.php

Press Ctrl-C to stop.
TXT
wait -n "${children[@]}" || true
echo "a process exited; stopping the rest" >&2
