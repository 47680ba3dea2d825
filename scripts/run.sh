#!/usr/bin/env bash
# Runs PushChat Server locally on an embedded default: a throwaway PostgreSQL cluster under .local/ (kept between
# runs; `--fresh` starts from an empty one), migrated, and the API server in development mode.
# Ctrl-C stops everything.
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

api_port=${PUSHCHAT_API_PORT:-44447}
if (exec 3<>"/dev/tcp/127.0.0.1/$api_port") 2>/dev/null; then
    api_port=$(pg_free_port)
    echo "    port 44447 is busy: the API uses $api_port"
fi
export PUSHCHAT_API_HOST=${PUSHCHAT_API_HOST:-127.0.0.1} PUSHCHAT_API_PORT=$api_port

echo "==> starting the API server (log: log/api_development.log)"
"$bin/pushchat-api" serve development &
children+=($!)

for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$api_port") 2>/dev/null; then break; fi
    sleep 0.1
done

api="http://127.0.0.1:$api_port"
cat <<TXT

PushChat Server is running (development mode).

  API            $api/api.php
  Test forms     $api/  (join two fake devices with the same secret code, then send a message)
                 $api/test/api_join.html   $api/test/api_message.html
  Database check $api/test/database
  psql           psql '$PUSHCHAT_DATABASE_URL'
                 SELECT * FROM active_users;  SELECT message_id, device_token, payload, time_sent FROM push_queue;
  Logs           log/api_development.log

From a shell:
  curl -d cmd=join -d udid=$(printf '%040d' 1) -d token=$(printf 'ab%.0s' {1..32}) -d name=Ann -d code=demo $api/api.php
  curl -d cmd=join -d udid=$(printf '%040d' 2) -d token=$(printf 'cd%.0s' {1..32}) -d name=Bob -d code=demo $api/api.php
  curl -d cmd=message -d udid=$(printf '%040d' 1) -d text=Hello $api/api.php

Press Ctrl-C to stop.
TXT
wait -n "${children[@]}" || true
echo "a process exited; stopping the rest" >&2
