#!/usr/bin/env bash
# Runs every test, each stage timed:
#   swift    unit tests, and integration tests against a throwaway PostgreSQL cluster started here (under .local/,
#            removed afterwards; ssl = on with a self-signed certificate, as Debian's), the executables run as an
#            unprivileged user without capabilities when this runs as root
#   browser  headless Chromium drives the test forms and reads the simulator's lock-screen page
#            (scripts/browser-test.py; installs Debian's chromium when missing; screenshot in .local/test-output/)
#   spec     schemathesis (PyPI) sends requests generated from docs/openapi.yaml to a running pushchat-api: no 5xx,
#            every answer as the spec says (scripts/api-spec-test.py; seed 1, 15 examples per operation, ≤ 120 s of requests)
#   deploy   the deployment guide followed to the letter into a scratch folder (scripts/deploy-test.sh; root only)
#   systemd  the units under a real systemd: the release installed in a Debian root booted with systemd-nspawn
#            (scripts/systemd-test.sh; root only; debootstraps the root once into .local/)
#   fuzz     libFuzzer with AddressSanitizer on every parser of untrusted bytes, 20 s each with a new seed, printed
#            (scripts/fuzz.sh; PUSHCHAT_FUZZ_SECONDS and PUSHCHAT_FUZZ_SEED change them)
#
#
# The release (for deploy's make dist) and the fuzz target build in the background at idle priority while the tests
# run (PUSHCHAT_TEST_PREBUILD=0: not).
#
#   ./scripts/test.sh                    every stage
#   ./scripts/test.sh ARGS...            only `swift test ARGS` (e.g. --filter FormFields)
#   ./scripts/test.sh --stage NAME...    only these stages (swift, browser, spec, deploy, systemd, fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/postgres.sh

stages=(swift browser spec deploy systemd fuzz)
if [ "${1:-}" = "--stage" ]; then
    shift
    stages=("$@")
    set --
elif [ $# -gt 0 ]; then
    stages=(swift)
fi
has_stage() { [[ " ${stages[*]} " == *" $1 "* ]]; }
for stage in "${stages[@]}"; do
    case "$stage" in
    swift | browser | spec | deploy | systemd | fuzz) ;;
    *)
        echo "test.sh: no stage '$stage' (swift, browser, spec, deploy, systemd, fuzz)" >&2
        exit 2
        ;;
    esac
done
[ ${#stages[@]} -gt 0 ] || { echo "test.sh: --stage needs a stage (swift, browser, spec, deploy, systemd, fuzz)" >&2; exit 2; }

timings=()
stage_start=0
begin() {
    echo "==> $1"
    stage_start=$(date +%s)
}
finish() { timings+=("$(printf '%-34s %4d s' "$1" $(($(date +%s) - stage_start)))"); }

pg_ensure_installed
# Debian's packages the tests run beside the programs: PgBouncer (PoolerTests, and the deployment test through
# transaction pooling), nginx, certbot and nftables (the deployment test runs the guide's blocks: certbot is named,
# not run; the rules load in a private network namespace), systemd's tools
# (systemd-analyze verify on the units) and prometheus (promtool checks the alert rules). Their own services, which
# the packages start, are stopped: the tests run their own on free ports.
apt_ensure() {
    local package=$1 program=$2 sudo=""
    [ -x "$program" ] && return
    echo "==> installing Debian's $package"
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$package" >/dev/null
    $sudo systemctl disable --now "$package" >/dev/null 2>&1 || $sudo service "$package" stop >/dev/null 2>&1 || true
}
apt_ensure pgbouncer /usr/sbin/pgbouncer
if has_stage deploy; then
    apt_ensure nginx /usr/sbin/nginx
    apt_ensure certbot /usr/bin/certbot
    apt_ensure nftables /usr/sbin/nft
    apt_ensure systemd /usr/bin/systemd-analyze
    apt_ensure prometheus /usr/bin/promtool
fi
# The webhook tests' receiver checks every body against docs/openapi.yaml with jsonschema and PyYAML: the spec stage's
# schemathesis (the same pinned version) brings both, installed here first when missing.
if has_stage swift && ! python3 -c "import jsonschema, yaml" >/dev/null 2>&1; then
    echo "==> installing schemathesis (PyPI) for jsonschema and PyYAML"
    python3 -m pip install -q "$(sed -n 's/^SCHEMATHESIS = "\(.*\)"$/\1/p' scripts/api-spec-test.py)"
fi
# The Web Push tests decrypt what the project encrypts with an implementation of their own: http_ece (on the
# `cryptography` package), pinned.
if has_stage swift && ! python3 -c "import http_ece" >/dev/null 2>&1; then
    echo "==> installing http-ece (PyPI) for the Web Push tests' independent decryption"
    python3 -m pip install -q "http-ece==1.2.1"
fi
if has_stage systemd; then
    apt_ensure systemd-container /usr/bin/systemd-nspawn
    apt_ensure debootstrap /usr/sbin/debootstrap
fi
cluster="$PWD/.local/test-postgres-$$"
cleanup() {
    [ -z "${prebuild_pid:-}" ] || kill -- -"$prebuild_pid" 2>/dev/null || true
    pg_stop "$cluster"
    rm -rf "$cluster" "$cluster.tls"
    if [ ${#timings[@]} -gt 0 ]; then
        echo "==> stage times"
        printf '    %s\n' "${timings[@]}"
    fi
    # The failures again at the very end, where a log's tail (CI keeps only that) shows them.
    if [ -f "$swift_log" ] && grep -aq '✘' "$swift_log"; then
        echo "==> swift test failures (the whole log: $swift_log)"
        grep -a '✘' "$swift_log" | sed 's/\x1b\[[0-9;]*m//g' | head -n 80
    fi
}
swift_log="$PWD/.local/test-output/swift-test.log"
rm -f "$swift_log"
trap cleanup EXIT
trap 'exit 130' INT TERM

begin "starting a throwaway PostgreSQL cluster (ssl = on, self-signed certificate, as Debian's)"
pg_start "$cluster" tls
export PUSHCHAT_TEST_DATABASE_URL="$PG_URL"
export PUSHCHAT_TEST_DATABASE_CA="$PG_CA_FILE"
echo "    $PUSHCHAT_TEST_DATABASE_URL"
finish "PostgreSQL"

begin "swift build --build-tests"
swift build --build-tests
finish "build"
bin=$(swift build --show-bin-path)

# The builds the later stages start with (the deployment stage's `make dist`, the fuzz stage's target with its
# sanitizers: each from scratch on a fresh clone, a third of CI's time) run ahead in the background at the lowest CPU
# and I/O priority (SCHED_IDLE, ionice idle) while the tests run, which leave about half of the cores idle. Each stage
# waits for its own build, then runs its command as before: a background build that failed is built again there, in
# the stage's log. PUSHCHAT_TEST_PREBUILD=0 turns it off.
prebuild_pid=""
prebuild_log="$PWD/.local/test-output/prebuild.log"
prebuild_release_done="$PWD/.local/test-output/prebuild.release-done"
prebuild_fuzz_done="$PWD/.local/test-output/prebuild.fuzz-done"
rm -f "$prebuild_release_done" "$prebuild_fuzz_done"
prebuild_release=0
prebuild_fuzz=0
[ "$(id -u)" -eq 0 ] && has_stage deploy && prebuild_release=1
has_stage fuzz && prebuild_fuzz=1
if [ "${PUSHCHAT_TEST_PREBUILD:-1}" = 1 ] && [ $((prebuild_release + prebuild_fuzz)) -gt 0 ]; then
    mkdir -p "$(dirname "$prebuild_log")"
    ahead=()
    [ $prebuild_release = 1 ] && ahead+=("the release (make release)")
    [ $prebuild_fuzz = 1 ] && ahead+=("the fuzz target")
    echo "    building ahead in the background at idle priority: ${ahead[*]} (log: $prebuild_log)"
    setsid chrt --idle 0 ionice -c 3 bash -c '
        if [ "$1" = 1 ]; then make release || echo "prebuild: make release failed"; fi
        touch "$3"
        if [ "$2" = 1 ]; then
            if ./scripts/fuzz.sh --build-only; then touch "$4"; else echo "prebuild: the fuzz build failed"; fi
        fi
    ' prebuild "$prebuild_release" "$prebuild_fuzz" "$prebuild_release_done" "$prebuild_fuzz_done" >"$prebuild_log" 2>&1 &
    prebuild_pid=$!
fi
# Waits for the background builds: the release's (release) or all of them (all), saying how long it waited.
await_prebuild() {
    [ -n "$prebuild_pid" ] || return 0
    local waited=$SECONDS
    while kill -0 "$prebuild_pid" 2>/dev/null; do
        [ "$1" = release ] && [ -e "$prebuild_release_done" ] && break
        sleep 1
    done
    echo "    waited $((SECONDS - waited)) s for the build begun in the background (log: $prebuild_log)"
}

# As root, the executables the tests start run as an unprivileged user without capabilities, as systemd runs them
# (User=, CapabilityBoundingSet=): a privilege the code needs by accident fails here, not in production.
if [ "$(id -u)" -eq 0 ]; then
    service_user=pushchat-test
    if ! id -u "$service_user" >/dev/null 2>&1; then
        echo "==> creating the system user $service_user (the tests run the executables as it)"
        useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$service_user"
    fi
    if ! setpriv --reuid="$service_user" --regid="$service_user" --init-groups test -x "$bin/pushchat-api"; then
        echo "the user $service_user cannot run $bin/pushchat-api (is a parent folder not traversable?)" >&2
        exit 1
    fi
    export PUSHCHAT_TEST_SERVICE_USER=$service_user
    echo "    executables run as $service_user (setpriv: no capabilities, no new privileges)"
fi

# The test binary itself (what `swift test --no-parallel` runs, without its buffering of the output), watched: when no
# test prints anything for PUSHCHAT_TEST_STALL_SECONDS (600), the tests still running and the processes they started
# are named and the stage fails, instead of a hang using up CI's whole budget without a word.
# Names the processes the test binary PID started and kills them and it.
stop_test_binary() {
    echo "test.sh: the processes it started:" >&2
    ps -o pid=,etime=,args= --ppid "$1" | sed 's/^/    /' >&2 || true
    pkill -KILL -P "$1" 2>/dev/null || true
    kill -KILL "$1" 2>/dev/null || true
}
run_swift_tests() {
    local stall=${PUSHCHAT_TEST_STALL_SECONDS:-600} status=0 stalled=0 pid tailer quiet
    : >"$swift_log"
    "$bin/pushchat-serverPackageTests.xctest" --testing-library swift-testing --no-parallel "$@" >"$swift_log" 2>&1 &
    pid=$!
    tail -n +1 -f --pid=$pid "$swift_log" &
    tailer=$!
    while kill -0 $pid 2>/dev/null; do
        sleep 5
        quiet=$(($(date +%s) - $(stat -c %Y "$swift_log")))
        # Every test has run (the summary is written) but the binary has not exited: what it waits for is named and it
        # is stopped; the results stand.
        if [ $quiet -ge 60 ] && grep -aq "Test run with [0-9]* tests\? .*\(passed\|failed\) after" "$swift_log" && kill -0 $pid 2>/dev/null; then
            echo "test.sh: the test binary did not exit $quiet s after its last test" >&2
            stop_test_binary $pid
            wait $pid 2>/dev/null || true
            wait $tailer 2>/dev/null || true
            grep -aq "Test run with [0-9]* tests\? .*passed after" "$swift_log"
            return
        fi
        if [ $quiet -ge "$stall" ] && kill -0 $pid 2>/dev/null; then
            stalled=1
            {
                echo "test.sh: no test output for $quiet s; still running:"
                sed 's/\x1b\[[0-9;]*m//g' "$swift_log" | awk '
                    / Test .* started\.$/ && !/ Test (case|run) / { name = $0; sub(/^.* Test /, "", name); sub(/ started\.$/, "", name); open[name] = 1 }
                    / Test .* (passed|failed|skipped)/ { name = $0; sub(/^.* Test /, "", name); sub(/ (passed|failed|skipped).*$/, "", name); delete open[name] }
                    END { for (name in open) print "    " name }'
            } >&2
            stop_test_binary $pid
            break
        fi
    done
    wait $pid || status=$?
    wait $tailer 2>/dev/null || true
    [ $stalled -eq 0 ] || { echo "test.sh: the swift tests stalled: stopped after $stall s without output" >&2; return 1; }
    return $status
}

if has_stage swift; then
    begin "swift test"
    # Serial: the binary protocol has no acks, so its fault tests cannot tell a CPU-starved gateway from one that
    # accepted; parallel suites (HTTP/2 load beside binary drops) starve it on 2 cores.
    mkdir -p "$(dirname "$swift_log")"
    run_swift_tests "$@"
    # Here every test has its PostgreSQL: a test skipped for want of one (`swift test` alone skips them) is a failure.
    if grep -aq "was cancelled after" "$swift_log"; then
        echo "test.sh: tests were skipped:" >&2
        grep -a "was cancelled after" "$swift_log" | head -n 5 >&2
        exit 1
    fi
    finish "swift test"
fi

if has_stage browser; then
    begin "browser test (headless Chromium)"
    if ! command -v chromium >/dev/null; then
        echo "    installing Debian's chromium"
        sudo=""
        [ "$(id -u)" -ne 0 ] && sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
    fi
    python3 scripts/browser-test.py "$bin" "$PWD/.local/test-output"
    finish "browser test"
fi

if has_stage spec; then
    begin "API spec test (schemathesis against docs/openapi.yaml)"
    python3 scripts/api-spec-test.py "$bin" "$PWD/.local/test-output"
    finish "API spec test"
fi

# A stage that needs root (it creates users, clusters, containers): STAGE SCRIPT TITLE LABEL WHY.
root_stage() {
    has_stage "$1" || return 0
    if [ "$(id -u)" -eq 0 ]; then
        begin "$3"
        [ "$1" != deploy ] || await_prebuild release
        "$2"
        finish "$4"
    else
        echo "==> $4 skipped: it needs root ($5)"
    fi
}
root_stage deploy ./scripts/deploy-test.sh "deployment test (deploy/README.md to the letter)" "deployment test" \
    "it creates the service user and a PostgreSQL cluster"
root_stage systemd ./scripts/systemd-test.sh "the units under systemd (systemd-nspawn)" "units under systemd" \
    "debootstrap, systemd-nspawn"

if has_stage fuzz; then
    begin "fuzzing (libFuzzer, AddressSanitizer)"
    await_prebuild all
    # Built ahead: not again (SwiftPM would plan the build anew and, with two sanitizers, compile everything again).
    prebuilt=0
    [ -e "$prebuild_fuzz_done" ] && prebuilt=1
    PUSHCHAT_FUZZ_PREBUILT=$prebuilt ./scripts/fuzz.sh "${PUSHCHAT_FUZZ_SECONDS:-20}"
    finish "fuzzing"
fi
