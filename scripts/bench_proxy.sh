#!/usr/bin/env bash
# Benchmarks claimguard's pass-through cost against MariaDB directly and HAProxy (TCP), writes docs/BENCHMARKS.md.
#
# Installs nothing (run scripts/setup.sh first). Builds a Release claimguard in $BUILD_DIR if needed, then runs
# tests/integration/bench_proxy.py, which starts its own MariaDB, claimguard and HAProxy and runs sysbench.
#
# Environment (defaults in brackets):
#   BENCH_DURATION [20]    seconds per measured run     BENCH_WARMUP [3]    seconds of warm-up before each
#   BENCH_THREADS ["1 8 32"]                            BENCH_PS_MODES ["auto disable"] (sysbench --db-ps-mode)
#   BENCH_WORKLOADS ["oltp_point_select oltp_read_only"]
#   BENCH_TABLES [4]  BENCH_TABLE_SIZE [10000]          BENCH_CLAIMGUARD_THREADS [1; 0: one per core]
#   BUILD_DIR [build-release]  BENCH_BUILD_TYPE [Release] (used only when BUILD_DIR is configured here)
#   BENCH_ROUNDS [1]  runs per cell, the three targets interleaved; the median is shown
#   BENCH_DOC [docs/BENCHMARKS.md]
#   BENCH_KEEP [0]   1: keep the temporary directory with all server logs
#   BENCH_RULES [""]  a rules file claimguard loads (e.g. rules/examples/coupon.yaml: rules loaded, nothing matches)
#   BENCH_BASELINE [""]  another claimguard binary (say, before a change) measured as a fourth interleaved target
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${BUILD_DIR:-$root/build-release}"
doc="${BENCH_DOC:-$root/docs/BENCHMARKS.md}"
# Debian's python3 (with the packages setup.sh installs), not a pyenv or venv one earlier in PATH.
python=/usr/bin/python3
[ -x "$python" ] || python="$(command -v python3)"

for tool in mariadbd mariadb-install-db sysbench haproxy cmake ninja; do
  command -v "$tool" >/dev/null || { echo "bench_proxy: $tool not found; run scripts/setup.sh" >&2; exit 1; }
done

if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${BENCH_BUILD_TYPE:-Release}" -DCLAIMGUARD_BENCH=OFF
fi
cmake --build "$build_dir" --target claimguard -j2
build_type="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build_dir/CMakeCache.txt")"

keep=()
[ "${BENCH_KEEP:-0}" = 1 ] && keep=(--keep)
[ -n "${BENCH_RULES:-}" ] && keep+=(--rules "$(realpath "$BENCH_RULES")")
[ -n "${BENCH_BASELINE:-}" ] && keep+=(--baseline "$(realpath "$BENCH_BASELINE")")

exec "$python" "$root/tests/integration/bench_proxy.py" \
  --claimguard "$build_dir/proxy/claimguard" \
  --doc "$doc" \
  --duration "${BENCH_DURATION:-20}" \
  --warmup "${BENCH_WARMUP:-3}" \
  --threads "${BENCH_THREADS:-1 8 32}" \
  --workloads "${BENCH_WORKLOADS:-oltp_point_select oltp_read_only}" \
  --ps-modes "${BENCH_PS_MODES:-auto disable}" \
  --tables "${BENCH_TABLES:-4}" \
  --table-size "${BENCH_TABLE_SIZE:-10000}" \
  --claimguard-threads "${BENCH_CLAIMGUARD_THREADS:-1}" \
  --rounds "${BENCH_ROUNDS:-1}" \
  --build-type "${build_type:-unknown}" \
  "${keep[@]}"
