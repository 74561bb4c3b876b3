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
set -euo pipefail

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
