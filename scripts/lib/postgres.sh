# Throwaway PostgreSQL clusters for `scripts/run.sh` and `scripts/test.sh`. Source it; it defines functions only.
#
#   pg_ensure_installed          install Debian's postgresql when no server binaries are found
#   pg_start DIR [tls]           init DIR if empty, start on a free 127.0.0.1 port; sets PG_PORT and PG_URL.
#                                With "tls": ssl = on with a self-signed certificate (as Debian's stock server has);
#                                PG_URL then has no sslmode (libpq's default, prefer) and PG_CA_FILE names the
#                                certificate (for sslmode=verify-full tests)
#                                PG_DURABLE=1: Debian's durability (fsync, synchronous_commit, full_page_writes on);
#                                otherwise off, as a throwaway cluster can afford
#   pg_stop DIR                  fast shutdown
#   pg_restart DIR PORT [tls]    start a stopped cluster again on its port (the fault tests stop and start it)
#
# PostgreSQL refuses to run as root, so as root every server command runs as the `postgres` user.

pg_bindir() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [ -n "$dir" ] && [ -x "$dir/initdb" ] && echo "$dir"
}

pg_ensure_installed() {
    if [ -n "$(pg_bindir)" ] && command -v psql >/dev/null; then return 0; fi
    echo "==> installing PostgreSQL (Debian package postgresql)"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql postgresql-client >/dev/null
    # Debian's package starts its own cluster on 5432; the project never uses it.
    [ -n "$(pg_bindir)" ] || { echo "PostgreSQL server binaries not found after installing" >&2; return 1; }
}

# Runs a server command as the cluster owner.
pg_as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

pg_free_port() {
    local port low
    # Below the kernel's ephemeral range: a port there can be the local end of an outgoing connection, and then
    # binding it fails although nothing listens on it.
    low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    [ "$low" -gt 12000 ] 2>/dev/null || low=32768
    for _ in $(seq 1 200); do
        port=$(( 10000 + RANDOM % (low - 10000) ))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    echo "no free port found" >&2
    return 1
}

# A self-signed server certificate for 127.0.0.1 / localhost in DIR.tls/ (like Debian's "snakeoil": nobody signed it).
pg_self_signed_certificate() {
    local dir=$1.tls
    mkdir -p "$dir"
    if [ ! -s "$dir/server.crt" ]; then
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=localhost" \
            -addext "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1" \
            -keyout "$dir/server.key" -out "$dir/server.crt" 2>/dev/null \
            || { echo "cannot create the cluster's TLS certificate (openssl)" >&2; return 1; }
    fi
    chmod 755 "$dir"
    chmod 644 "$dir/server.crt"
    chmod 600 "$dir/server.key"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir/server.key"
    echo "$dir"
}

pg_start() {
    local dir=$1 tls=${2:-} bin tls_options="" tls_dir="" durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    bin=$(pg_bindir)
    if [ "${PG_DURABLE:-0}" = 1 ]; then durability=""; fi
    if [ "$tls" = tls ]; then
        tls_dir=$(pg_self_signed_certificate "$dir") || return 1
        tls_options="-c ssl=on -c ssl_cert_file=$tls_dir/server.crt -c ssl_key_file=$tls_dir/server.key"
    fi
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then
        chown postgres: "$dir"
        chmod 700 "$dir"
        if ! runuser -u postgres -- test -w "$dir"; then
            echo "the postgres user cannot reach $dir (a parent folder is not traversable)" >&2
            return 1
        fi
    fi
    if [ ! -f "$dir/PG_VERSION" ]; then
        pg_as_owner "$bin/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 --no-sync >"$dir.initdb.log" 2>&1 \
            || { cat "$dir.initdb.log" >&2; return 1; }
        rm -f "$dir.initdb.log"
    fi
    # A run that was killed hard may have left its server running: stop it, it is ours.
    if pg_as_owner "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
        pg_as_owner "$bin/pg_ctl" -D "$dir" -m fast -w -t 30 stop >/dev/null 2>&1 || true
    fi
    local attempt
    for attempt in 1 2 3 4 5; do
        PG_PORT=$(pg_free_port) || return 1
        rm -f "$dir/server.log"
        if pg_as_owner "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
            -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c max_connections=200 $durability $tls_options" \
            start >/dev/null; then
            break
        fi
        # Another process took the port between the check and the start: try another one.
        if [ "$attempt" -eq 5 ] || ! grep -q "could not create any TCP/IP sockets" "$dir/server.log"; then
            cat "$dir/server.log" >&2
            return 1
        fi
        echo "port $PG_PORT is in use; trying another" >&2
    done
    if [ -n "$tls_dir" ]; then
        PG_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres"
        PG_CA_FILE="$tls_dir/server.crt"
    else
        PG_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
        PG_CA_FILE=""
    fi
    export PG_PORT PG_URL PG_CA_FILE
}

pg_restart() {
    local dir=$1 port=$2 tls=${3:-} tls_options=""
    if [ "$tls" = tls ]; then
        tls_options="-c ssl=on -c ssl_cert_file=$dir.tls/server.crt -c ssl_key_file=$dir.tls/server.key"
    fi
    pg_as_owner "$(pg_bindir)/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c max_connections=200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off $tls_options" \
        start >/dev/null || { cat "$dir/server.log" >&2; return 1; }
}

pg_stop() {
    local dir=$1
    [ -f "$dir/postmaster.pid" ] || return 0
    pg_as_owner "$(pg_bindir)/pg_ctl" -D "$dir" -m fast -w -t 30 stop >/dev/null 2>&1 || true
}

# Creates database $2 on the running cluster unless it exists.
pg_create_database() {
    local port=$1 name=$2
    if ! psql -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$name'" | grep -q 1; then
        psql -h 127.0.0.1 -p "$port" -U postgres -d postgres -qc "CREATE DATABASE \"$name\"" >/dev/null
    fi
}
