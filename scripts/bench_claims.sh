#!/usr/bin/env bash
# Benchmarks claims/s and p95 of the naive flow direct, the hand fix direct and the naive flow through claimguard.
#
# Installs nothing (run scripts/setup.sh first). Builds Release claimguard and claimguard-load in $BUILD_DIR if
# needed, then runs scripts/bench_claims.py, which starts its own MariaDB (legacy schema + the UNIQUE index), Redis
# and claimguard instances (tests/incident/cluster.py) and rewrites the block between <!-- claims:begin --> and
# <!-- claims:end --> in the document. Speeds are reported, never asserted; exit status is non-zero only when the
# benchmark could not run.
#
# Environment (defaults in brackets):
#   BENCH_CLAIMS_SECONDS [15]   seconds per measured run     BENCH_CLAIMS_WARMUP [3]  warm-up seconds before each
#   BENCH_CLAIMS_THREADS ["8 32 64"]                         BENCH_CLAIMS_ROUNDS [1]  runs per cell (median shown)
#   BENCH_CLAIMS_CELLS ["naive_direct fixed_direct naive_claimguard naive_claimguard_noredis
#                        naive_claimguard_noaudit naive_relay fixed_relay fixed_claimguard"]
#   BENCH_CLAIMS_STOCK [1000000]  stock per run; as many users, each claiming once, so nothing sells out
#   BENCH_CLAIMS_PROTOCOL [text]  text or prepared           BENCH_CLAIMGUARD_THREADS [1; 0: one per core]
#   BENCH_CLAIMS_FOUND_ROWS [1]   1: CLIENT_FOUND_ROWS, as JDBC connects (a naive UPDATE then never reports 0 rows)
#   BENCH_CLAIMS_FLUSH_LOG_AT_TRX_COMMIT [server's: 2]       SET GLOBAL before measuring (0, 1 or 2)
#   BUILD_DIR [build-release]  BENCH_BUILD_TYPE [Release] (used only when BUILD_DIR is configured here)
#   BENCH_DOC [docs/BENCHMARKS.md]   BENCH_KEEP [0]  1: keep the temporary directory with all server logs
#
# `scripts/bench_claims.sh flash` runs the flash-sale benchmarks of issues 11 and 20 instead (scripts/bench_flash.py:
# herd, hot row in transactions, autocommit; a durable MariaDB; the block between <!-- flash:begin --> and
# <!-- flash:end -->). About 12 minutes per storage setting on a 2-core machine with the defaults (the issue's
# cells; 5 s runs after a 1 s warm-up). Its knobs (BENCH_FLASH_SMOKE=1 makes every one tiny, every cell kept):
#   BENCH_FLASH_SUITES ["herd hotrow autocommit"]
#   BENCH_FLASH_HERD_CELLS / _HOTROW_CELLS / _AUTOCOMMIT_CELLS   cells FLOW_direct or FLOW_claimguard[N][+FEATURE...],
#       FLOW naive, fixed, naive_tx, fixed_tx; N sidecars (default 1) in front of the one database; FEATURE
#       read_cache, admission, defer, group_update, reserve (see bench_flash.py for the defaults)
#   BENCH_FLASH_HERD_THREADS ["64 256"]  BENCH_FLASH_HERD_STOCKS ["100 10000"]  BENCH_FLASH_HERD_ATTEMPTS [20000]
#   BENCH_FLASH_HERD_USERS [20000] (attempts and users at least 3 and 2 per coupon)  BENCH_FLASH_HOTROW_THREADS [64]
#   BENCH_FLASH_HOTROW_SECONDS [5]  BENCH_FLASH_APP_WORK_MS [1]  BENCH_FLASH_AUTOCOMMIT_THREADS ["1 8 64"]
#   BENCH_FLASH_AUTOCOMMIT_SECONDS [5]  BENCH_FLASH_WARMUP [1]
#   BENCH_FLASH_RULE_LINES  "FEATURE=yaml; yaml|FEATURE=..." the stock-rule lines of features
#   BENCH_FLASH_FSYNC_DELAY_US [0]  slow storage: every fsync/fdatasync of MariaDB waits this much longer
#       (tests/load/slow_fsync.cpp, preloaded); its results go to a block of their own (flash-slow-storage)
#   BENCH_CLAIMS_PROTOCOL, BENCH_CLAIMS_FOUND_ROWS, BENCH_CLAIMGUARD_THREADS, BUILD_DIR, BENCH_DOC, BENCH_KEEP as above
set -euo pipefail

mode="${1:-claims}"
case "$mode" in
  claims | flash) ;;
  *) echo "usage: scripts/bench_claims.sh [claims|flash]" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build-release}"
doc="${BENCH_DOC:-$root/docs/BENCHMARKS.md}"
# Debian's python3 (with the packages setup.sh installs), not a pyenv or venv one earlier in PATH.
python=/usr/bin/python3
[ -x "$python" ] || python="$(command -v python3)"

for tool in mariadbd mariadb-install-db mariadb redis-server cmake ninja git; do
  command -v "$tool" >/dev/null || { echo "bench_claims: $tool not found; run scripts/setup.sh" >&2; exit 1; }
done

if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${BENCH_BUILD_TYPE:-Release}" -DCLAIMGUARD_BENCH=OFF
fi
cmake --build "$build_dir" --target claimguard claimguard-load -j2
build_type="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build_dir/CMakeCache.txt")"

if [ "$mode" = flash ]; then
  invocation=""
  for var in BUILD_DIR BENCH_FLASH_SMOKE BENCH_FLASH_SUITES BENCH_FLASH_HERD_CELLS BENCH_FLASH_HOTROW_CELLS \
             BENCH_FLASH_AUTOCOMMIT_CELLS BENCH_FLASH_HERD_THREADS BENCH_FLASH_HERD_STOCKS BENCH_FLASH_HERD_ATTEMPTS \
             BENCH_FLASH_HERD_USERS BENCH_FLASH_HOTROW_THREADS BENCH_FLASH_HOTROW_SECONDS BENCH_FLASH_APP_WORK_MS \
             BENCH_FLASH_AUTOCOMMIT_THREADS BENCH_FLASH_AUTOCOMMIT_SECONDS BENCH_FLASH_WARMUP BENCH_FLASH_RULE_LINES \
             BENCH_FLASH_FSYNC_DELAY_US BENCH_CLAIMS_PROTOCOL BENCH_CLAIMS_FOUND_ROWS BENCH_CLAIMGUARD_THREADS; do
    if [ -n "${!var:-}" ]; then
      value="${!var}"
      [ "$var" = BUILD_DIR ] && value="${value#"$root"/}"
      invocation+="$var=$(printf '%q' "$value") "
    fi
  done
  invocation+="scripts/bench_claims.sh flash"
  if [ "${BENCH_FLASH_SMOKE:-0}" = 1 ]; then
    : "${BENCH_FLASH_HERD_THREADS:=8 32}" "${BENCH_FLASH_HERD_STOCKS:=20 200}" "${BENCH_FLASH_HERD_ATTEMPTS:=600}"
    : "${BENCH_FLASH_HERD_USERS:=300}" "${BENCH_FLASH_HOTROW_THREADS:=8}" "${BENCH_FLASH_HOTROW_SECONDS:=2}"
    : "${BENCH_FLASH_AUTOCOMMIT_THREADS:=1 8 32}" "${BENCH_FLASH_AUTOCOMMIT_SECONDS:=2}" "${BENCH_FLASH_WARMUP:=0.5}"
  fi
  flash=()
  [ "${BENCH_KEEP:-0}" = 1 ] && flash+=(--keep)
  # name of the environment variable -> flag of bench_flash.py, passed only when set
  for pair in SUITES:suites HERD_CELLS:herd-cells HOTROW_CELLS:hotrow-cells AUTOCOMMIT_CELLS:autocommit-cells \
              HERD_THREADS:herd-threads HERD_STOCKS:herd-stocks HERD_ATTEMPTS:herd-attempts HERD_USERS:herd-users \
              HOTROW_THREADS:hotrow-threads HOTROW_SECONDS:hotrow-seconds APP_WORK_MS:app-work-ms \
              AUTOCOMMIT_THREADS:autocommit-threads AUTOCOMMIT_SECONDS:autocommit-seconds WARMUP:warmup; do
    var="BENCH_FLASH_${pair%%:*}"
    [ -n "${!var:-}" ] && flash+=("--${pair#*:}" "${!var}")
  done
  if [ "${BENCH_FLASH_FSYNC_DELAY_US:-0}" != 0 ]; then
    cmake --build "$build_dir" --target claimguard-slow-fsync -j2
    flash+=(--fsync-delay-us "$BENCH_FLASH_FSYNC_DELAY_US"
            --slow-fsync-lib "$build_dir/tests/load/claimguard-slow-fsync.so")
  fi
  if [ -n "${BENCH_FLASH_RULE_LINES:-}" ]; then
    IFS='|' read -r -a specs <<<"$BENCH_FLASH_RULE_LINES"
    for spec in "${specs[@]}"; do flash+=(--rule-lines "$spec"); done
  fi
  exec "$python" "$root/scripts/bench_flash.py" \
    --claimguard "$build_dir/proxy/claimguard" \
    --load "$build_dir/tests/load/claimguard-load" \
    --doc "$doc" \
    --protocol "${BENCH_CLAIMS_PROTOCOL:-text}" \
    --found-rows "${BENCH_CLAIMS_FOUND_ROWS:-1}" \
    --claimguard-threads "${BENCH_CLAIMGUARD_THREADS:-1}" \
    --build-type "${build_type:-unknown}" \
    --invocation "$invocation" \
    "${flash[@]}"
fi

# The command line as someone would type it again, with the knobs that were set.
invocation=""
for var in BUILD_DIR BENCH_CLAIMS_SECONDS BENCH_CLAIMS_WARMUP BENCH_CLAIMS_THREADS BENCH_CLAIMS_ROUNDS \
           BENCH_CLAIMS_CELLS BENCH_CLAIMS_STOCK BENCH_CLAIMS_PROTOCOL BENCH_CLAIMS_FOUND_ROWS \
           BENCH_CLAIMGUARD_THREADS BENCH_CLAIMS_FLUSH_LOG_AT_TRX_COMMIT; do
  if [ -n "${!var:-}" ]; then
    value="${!var}"
    [ "$var" = BUILD_DIR ] && value="${value#"$root"/}"
    invocation+="$var=$(printf '%q' "$value") "
  fi
done
invocation+="scripts/bench_claims.sh"

default_cells="naive_direct fixed_direct naive_claimguard naive_claimguard_noredis naive_claimguard_noaudit"
default_cells+=" naive_relay fixed_relay fixed_claimguard"
extra=()
[ "${BENCH_KEEP:-0}" = 1 ] && extra+=(--keep)
[ -n "${BENCH_CLAIMS_FLUSH_LOG_AT_TRX_COMMIT:-}" ] &&
  extra+=(--flush-log-at-trx-commit "$BENCH_CLAIMS_FLUSH_LOG_AT_TRX_COMMIT")

exec "$python" "$root/scripts/bench_claims.py" \
  --claimguard "$build_dir/proxy/claimguard" \
  --load "$build_dir/tests/load/claimguard-load" \
  --doc "$doc" \
  --seconds "${BENCH_CLAIMS_SECONDS:-15}" \
  --warmup "${BENCH_CLAIMS_WARMUP:-3}" \
  --threads "${BENCH_CLAIMS_THREADS:-8 32 64}" \
  --cells "${BENCH_CLAIMS_CELLS:-$default_cells}" \
  --rounds "${BENCH_CLAIMS_ROUNDS:-1}" \
  --stock "${BENCH_CLAIMS_STOCK:-1000000}" \
  --protocol "${BENCH_CLAIMS_PROTOCOL:-text}" \
  --found-rows "${BENCH_CLAIMS_FOUND_ROWS:-1}" \
  --claimguard-threads "${BENCH_CLAIMGUARD_THREADS:-1}" \
  --build-type "${build_type:-unknown}" \
  --invocation "$invocation" \
  "${extra[@]}"
