#!/usr/bin/env bash
# Fuzzes every parser of untrusted bytes with libFuzzer and AddressSanitizer, each for a bounded time, starting from
# the committed seed corpus (Fuzz/corpus/TARGET):
#   forms       the API's urlencoded bodies, then command validation (join, message, … with udid or user_id)
#   multipart   multipart/form-data bodies (first line: the boundary)
#   binary      binary notification frames (commands 0, 1, 2) and error responses
#   feedback    feedback-service tuples
#   provider    the provider API's JSON bodies (notifications, devices); parsed JSON must serialize and parse back equal
#   fcm         FCM's answers (error bodies, Retry-After), the token endpoint's answers, service-account files
#   http2       what an HTTP/2 server sends the push daemon: frames in two reads, header blocks, SETTINGS and
#               WINDOW_UPDATE applied to request bodies waiting for window
#   http2client the whole HTTP/2 client handler with three requests in flight: whatever the server's bytes, no trap,
#               and every request reported once (answered or unanswered)
#   webpush     a browser's subscription JSON (one that parses reads back the same), a push service's answers, an
#               aes128gcm body, a VAPID Authorization header, a Declarative Web Push message
#
#   ./scripts/fuzz.sh [SECONDS]        each target for SECONDS (default 60)
#   ./scripts/fuzz.sh --build-only     only builds the target (scripts/test.sh does it ahead, while the tests run)
#
# Every run takes a new seed, printed with each target (so each CI run explores inputs the last one did not); a
# failure is replayed with the same seed: PUSHCHAT_FUZZ_SEED=N ./scripts/fuzz.sh. PUSHCHAT_FUZZ_RUNS=N stops a target
# after N inputs instead (with a fixed seed, the same inputs in the same order on every machine).
#
# A crash, leak or timeout stops with a non-zero exit; the input is saved in .local/test-output/fuzz/ — add it to
# the target's corpus folder and it becomes a regression test (FuzzCorpusTests replays every corpus file).
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
if [ "${1:-}" = "--build-only" ]; then
    build_only=1
    shift
fi
seconds=${1:-60}
seed=${PUSHCHAT_FUZZ_SEED:-$((RANDOM * 32768 + RANDOM + 1))}
runs=${PUSHCHAT_FUZZ_RUNS:--1}
read -r -a targets <<<"${PUSHCHAT_FUZZ_TARGETS:-forms multipart binary feedback provider fcm http2 http2client webpush}"
out="$PWD/.local/test-output/fuzz"
mkdir -p "$out"

# SwiftPM's --sanitize fuzzer instruments only the product's own target; -Xswiftc gives every Swift module (the
# parsers in API and APNs among them) libFuzzer's coverage. AddressSanitizer everywhere, C included.
flags=(--scratch-path .build-fuzz --sanitize fuzzer --sanitize address -Xswiftc -sanitize=fuzzer -Xswiftc -DFUZZING)
# PUSHCHAT_FUZZ_PREBUILT=1: scripts/test.sh built it ahead, in the background, from the same sources.
if [ "${PUSHCHAT_FUZZ_PREBUILT:-0}" = 1 ] && [ -x .build-fuzz/debug/pushchat-fuzz ]; then
    echo "==> the fuzz target was built ahead (.build-fuzz)"
else
    echo "==> building the fuzz target with libFuzzer and AddressSanitizer (.build-fuzz)"
    swift build "${flags[@]}" --product pushchat-fuzz
fi
[ $build_only -eq 0 ] || exit 0
# The folder SwiftPM points .build-fuzz/debug at; not `swift build --show-bin-path`, which with two sanitizers makes
# the next build plan anew and compile everything again.
bin=.build-fuzz/debug

for target in "${targets[@]}"; do
    work=$(mktemp -d)
    cp Fuzz/corpus/"$target"/* "$work"/
    limit="${seconds} s"
    [ "$runs" != -1 ] && limit="$limit or $runs inputs"
    echo "==> fuzzing $target for $limit, seed $seed ($(ls "$work" | wc -l) corpus inputs; replay: PUSHCHAT_FUZZ_SEED=$seed)"
    if ! PUSHCHAT_FUZZ=$target "$bin/pushchat-fuzz" "$work" -seed="$seed" -runs="$runs" \
        -max_total_time="$seconds" -max_len=4096 -timeout=10 \
        -rss_limit_mb=2048 -artifact_prefix="$out/$target-" -print_final_stats=1 >"$out/$target.log" 2>&1; then
        tail -n 40 "$out/$target.log" >&2
        echo "fuzz: $target failed with seed $seed; the input is in $out" >&2
        rm -rf "$work"
        exit 1
    fi
    grep -E "stat::number_of_executed_units|stat::new_units_added" "$out/$target.log" | sed 's/^/    /'
    rm -rf "$work"
done
echo "==> fuzz: no crash in ${#targets[@]} targets"
