#!/usr/bin/env bash
# Runs every test: unit and integration tests (release build), the same under
# ASan+UBSan, and each libFuzzer target briefly. Idempotent; run as root on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${CLAIMGUARD_JOBS:-$(nproc)}
# Tests wait on servers, fsync and sleeps: the ASan stage runs half as many again as there are cores. The
# heavy ones (8 sidecars and a load, RESOURCE_LOCK claimguard_incident: the incident, model, soak and app-zoo
# tests) run one at a time, as one chain; the Release stage runs as many tests as there are cores, so that
# each test of that chain has at most one lighter test beside it (see there).
test_jobs=${CLAIMGUARD_TEST_JOBS:-$((jobs + (jobs + 1) / 2))}
release_test_jobs=${CLAIMGUARD_RELEASE_TEST_JOBS:-$jobs}
fuzz_seconds=${CLAIMGUARD_FUZZ_SECONDS:-10}
# Each stage says how long the one before it took (CI's budget is watched per stage).
stage_started=$SECONDS
stage() {
  echo "== ($((SECONDS - stage_started)) s) $*"
  stage_started=$SECONDS
}

bash scripts/setup.sh

stage "build (Release)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCLAIMGUARD_TEST_CASES=OFF >/dev/null
cmake --build build -j"$jobs"

# The ASan+UBSan build and the libFuzzer build compile in the background, at the lowest CPU priority,
# while the Release tests run: those tests wait on servers, fsync and sleeps much of the time (measured:
# apps.django 22 CPU-seconds in 24 s, peers.capi 53 in 109 s), so the builds take the idle CPU and the
# tests keep theirs (nice 19 weighs 15 against the tests' 1024). Their output goes to a log, printed if
# a build fails; the stage that needs a build waits for it.
# -O0 -g1 for ASan: the sanitizers need line tables, not full debug info, and -O0 halves the compile time
# of the coroutine-heavy files on CI's 2 cores.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCLAIMGUARD_SANITIZE=ON -DCLAIMGUARD_BENCH=OFF \
  -DCMAKE_CXX_FLAGS_DEBUG="-O0 -g1" -DCLAIMGUARD_TEST_CASES=OFF >/dev/null
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCLAIMGUARD_FUZZ=ON >/dev/null
background_log="$root/build-asan/background-build.log"
setsid nice -n 19 bash -c "cmake --build build-asan -j$jobs && cmake --build build-fuzz -j$jobs" \
  > "$background_log" 2>&1 &
background_build=$!
# A failing stage ends the script: the background build goes with it.
trap 'kill -- -"$background_build" 2>/dev/null || true' EXIT
wait_for_background_build() {
  if ! wait "$background_build"; then
    tail -n 80 "$background_log"
    echo "the background ASan/fuzz build failed (whole log: $background_log)"
    exit 1
  fi
  trap - EXIT
  tail -n 2 "$background_log"
}

# The integration and incident tests (labels integration, incident) run once, in the ASan+UBSan
# stage below, except the few that stage leaves out (asan_skip): here the unit tests, the app zoo,
# the model test, the peer suites, the Redis Cluster and Helm tests, and those few.
# Left out of the ASan stage (they run here): the restart and kill scenarios and the 20 MiB and
# one-byte-a-second transfers, whose minutes go to waiting and copying, not to code the other tests
# there do not run; and claimguard's command line (it_cli.claimguard: about 60 start-ups of the binary,
# 41 s under ASan against 7 s here, for option parsing the ASan unit tests run too).
asan_skip="^incident\.(fixed_direct|baseline_direct|mysql_restart|mysql_restart_transaction|sidecar_killed)$"
asan_skip+="|blob_20mib|slow_client_one_byte_a_second|^it_cli\.claimguard$"
# One ctest run for both sets (the tests without those labels, and asan_skip), so its scheduler packs them
# together: ctest takes one name pattern, so the two lists are joined into "^(name|...)$".
test_names() {
  ctest --test-dir build -N "$@" | sed -n 's/^ *Test *#[0-9]*: //p'
}
release_tests=$({ test_names -LE "integration|incident"; test_names -R "$asan_skip"; } | sort -u \
                | sed 's/[][\\.*+?^$(){}|]/\\&/g' | paste -sd '|')
stage "tests (Release), with the integration and incident tests the ASan stage leaves out"
# The chain of tests that hold RESOURCE_LOCK claimguard_incident (model.ci, the incident and Redis Cluster
# tests, soak.ci, the app zoo: about 12-13 minutes) is this stage's critical path. They used to be PROCESSORS 2,
# and ctest 3.25 starts such a test only when two slots are free at once: the 1-slot tests kept the slots busy,
# so the chain started 3 minutes late and its last 10 minutes ran alone, one test on the machine (fresh-clone
# runs at d61fdbf and d69d7fc). Now they take one slot each and COST starts the chain at once (model.ci 300
# first, the Redis Cluster tests 150 last, when the rest is done); at -j2 every other test of the stage runs in
# the second slot beside it (about 10 minutes of them), so a test of the chain never has more than one test
# beside it, as before.
ctest --test-dir build --output-on-failure -j"$release_test_jobs" --timeout 600 -R "^($release_tests)\$"

stage "waiting for the background ASan+UBSan and fuzz builds"
wait_for_background_build
stage "unit tests under ASan+UBSan"
# Under the sanitizers: every unit test (codec, rules, engine, admin server over real
# sockets, webhook over real TLS, config). The app zoo, the model test, the Redis Cluster tests (label
# redis_cluster: 3+3 redis-server nodes per case, about 2 minutes in all), the peer suites (label peers) and
# the memory bound per idle connection (label scale: ASan's allocator would measure itself) ran in the
# release stage above; the ASan stages never run them.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 900 -LE "integration|incident|helm|apps|redis_cluster|peers|model|readme|scale"
# Also under ASan+UBSan: every test that runs the proxy (two chained proxies, client and backend faults,
# reloads and shutdown, backend TLS, the incident replays and claim modes). The *_direct incident variants
# never start claimguard. A server's sanitizer report goes to its log, not to the test's output: the
# fixtures fail on it, and the scan below is the backstop. Leak checks stay with the unit tests: the
# proxies here are stopped by signals mid-work.
stage "integration and incident tests under ASan+UBSan"
# Here the chain of tests that hold claimguard_incident starts at once beside two 1-slot tests: it_admission,
# it_group_update and it_insert_select first (COST 300), then the incident replays and the threaded model
# regressions; it_reserve takes two slots and the same lock, so it runs after that chain, beside at most one
# other test (tests/integration/CMakeLists.txt).
touch build-asan/.sanitizer-stage-start
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j"$test_jobs" --timeout 900 -L "integration|incident" -E "$asan_skip"
reports=$(find build-asan/it_* build-asan/integration-* build-asan/incident -name '*.log' \
            -newer build-asan/.sanitizer-stage-start -not -path '*/mariadb/*' -not -path '*/redis/*' \
            -exec grep -lE 'ERROR: (Address|Leak)Sanitizer|runtime error:|UndefinedBehaviorSanitizer' {} + \
            2>/dev/null || true)
if [ -n "$reports" ]; then
  echo "sanitizer report(s) in the logs of sanitized servers:"
  echo "$reports"
  exit 1
fi
# Every test stops the sidecars it started: one left running is a harness bug (it_silent_paths once
# started two under one name and stopped one of them twice).
leftover=$(pgrep -a -f "^$root/build-asan/proxy/claimguard serve" || true)
if [ -n "$leftover" ]; then
  echo "claimguard processes the tests left running:"
  echo "$leftover"
  exit 1
fi

stage "fuzzers (${fuzz_seconds}s each, ${jobs} at a time)"
# Each fuzzer is one process on one core: they run side by side, $jobs at a time. A finding prints
# libFuzzer's report and the input (hex) so the run that found it can be replayed: save the hex as a
# file and run the fuzzer on it.
run_fuzzer() {
  local fuzzer=$1 name corpus seeds artifacts
  name=$(basename "$fuzzer")
  corpus="$root/build-fuzz/corpus/$name"
  seeds="$root/tests/fuzz/corpus/$name"
  [ -d "$seeds" ] || seeds=""
  artifacts="$root/build-fuzz/artifacts/$name"
  mkdir -p "$corpus" "$artifacts"
  "$fuzzer" -max_total_time="$fuzz_seconds" -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$corpus" $seeds > "$artifacts/log" 2>&1
}
report_fuzzer() {
  local name artifacts
  name=$(basename "$1")
  artifacts="$root/build-fuzz/artifacts/$name"
  echo "-- $name"
  if [ "$2" != 0 ]; then
    grep -v '^"' "$artifacts/log" | tail -n 60
    for input in "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* "$artifacts"/oom-*; do
      [ -f "$input" ] && { echo "input $(basename "$input"):"; od -An -tx1 -v "$input" | tr -d " \n"; echo; }
    done
    return 1
  fi
  tail -n 4 "$artifacts/log"
}
fuzzers=()
for fuzzer in build-fuzz/tests/fuzz/fuzz_*; do
  [ -x "$fuzzer" ] && fuzzers+=("$fuzzer")
done
[ ${#fuzzers[@]} -gt 0 ] || { echo "no fuzzer was built"; exit 1; }
failed=0
for ((i = 0; i < ${#fuzzers[@]}; i += jobs)); do
  batch=("${fuzzers[@]:i:jobs}")
  pids=()
  for fuzzer in "${batch[@]}"; do
    run_fuzzer "$fuzzer" &
    pids+=($!)
  done
  for j in "${!batch[@]}"; do
    rc=0
    wait "${pids[$j]}" || rc=$?
    report_fuzzer "${batch[$j]}" "$rc" || failed=1
  done
done
[ "$failed" = 0 ] || exit 1
stage "all tests passed (in ${SECONDS} s)"
