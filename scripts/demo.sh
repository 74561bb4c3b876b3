#!/usr/bin/env bash
# The README's demo: the coupon incident's legacy claim flow straight to MariaDB, then the same unchanged
# flow through claimguard after the DBA's one step (claimguard ddl), side by side. Run as root on Debian 12;
# idempotent; starts private servers on free loopback ports and stops them on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

build_dir=${CLAIMGUARD_BUILD_DIR:-$root/build}
jobs=${CLAIMGUARD_JOBS:-$(nproc)}
coupons=100           # coupon_stock.remain for the flash sale
users=300             # user ids 1..300 ...
attempts_per_user=2   # ... each trying twice, shuffled across threads
threads=24            # the incident: 8 app instances x 3 threads
proxies=4             # claimguard instances; the threads are spread over them
campaign=1
rules=$root/rules/examples/coupon.yaml
python=/usr/bin/python3
[ -x "$python" ] || python=python3

echo "== setup (Debian packages)"
bash scripts/setup.sh

echo "== build claimguard and claimguard-load in $build_dir"
if [ -f "$build_dir/CMakeCache.txt" ]; then
  # Keep the build type an existing build dir was configured with (scripts/test.sh uses build/ too).
  cmake -S . -B "$build_dir" >/dev/null
else
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build_dir" --target claimguard claimguard-load -j"$jobs"
claimguard=$build_dir/proxy/claimguard
load=$build_dir/tests/load/claimguard-load

work=$(mktemp -d "${TMPDIR:-/tmp}/claimguard-demo.XXXXXX")
cleanup() {
  "$python" tests/incident/cluster.py stop "$work" || true
  if [ "${CLAIMGUARD_DEMO_KEEP:-0}" = 1 ]; then
    echo "servers' logs kept in $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== start MariaDB (sql/legacy_schema.sql: no UNIQUE index) and Redis in $work"
"$python" tests/incident/cluster.py start-db "$work"
# shellcheck disable=SC1091  # KEY=VALUE lines written by cluster.py
. "$work/env"
sql() { mariadb --no-defaults -uroot --socket="$SOCKET" -N -B "$DATABASE" "$@"; }
reset_stock() {
  sql -e "TRUNCATE TABLE coupon_order; DELETE FROM coupon_stock;
          INSERT INTO coupon_stock (campaign_id, remain, version) VALUES ($campaign, $coupons, 0);"
}
# run_load OUT TARGET_PORT...: the legacy flow (SELECT remain; remain > 0?; UPDATE remain = <literal>; INSERT).
run_load() {
  local out=$1
  shift
  local targets=()
  for port in "$@"; do targets+=(--target "127.0.0.1:$port"); done
  "$load" "${targets[@]}" --user "$APP_USER" --password "$APP_PASSWORD" --database "$DATABASE" \
    --threads "$threads" --users "$users" --attempts-per-user "$attempts_per_user" --campaign "$campaign" \
    --json >"$out"
}
# facts OUT: what MariaDB holds after a run: orders, duplicate (user, campaign) pairs, remain.
facts() {
  sql -e "SELECT (SELECT COUNT(*) FROM coupon_order WHERE campaign_id = $campaign),
                 (SELECT COUNT(*) FROM (SELECT user_id FROM coupon_order WHERE campaign_id = $campaign
                                        GROUP BY user_id HAVING COUNT(*) > 1) d),
                 (SELECT remain FROM coupon_stock WHERE campaign_id = $campaign);" >"$1"
}

echo "== 1. the legacy app straight to MariaDB: $threads threads, $users users x $attempts_per_user attempts, $coupons coupons"
reset_stock
run_load "$work/direct.json" "$MARIADB_PORT"
facts "$work/direct.facts"

echo "== 2. the DBA's one step: claimguard ddl $(basename "$rules") | mariadb"
reset_stock
"$claimguard" ddl "$rules" | tee "$work/ddl.sql" | grep -v '^--' | sed '/^$/d'
sql <"$work/ddl.sql"

echo "== 3. $proxies claimguard sidecars in front of the same MariaDB (Redis first filter at 127.0.0.1:$REDIS_PORT)"
"$python" tests/incident/cluster.py start-proxies "$work" --claimguard "$claimguard" --count "$proxies" \
  --rules "$rules"
. "$work/env"
reset_stock
run_load "$work/claimguard.json" ${PROXY_PORTS//,/ }
facts "$work/claimguard.facts"

echo
"$python" - "$coupons" "$work" <<'EOF'
import json, sys
coupons, work = int(sys.argv[1]), sys.argv[2]
runs = []
for name in ("direct", "claimguard"):
    with open(f"{work}/{name}.json") as f:
        load = json.load(f)
    with open(f"{work}/{name}.facts") as f:
        orders, dup_pairs, remain = (int(x) for x in f.read().split())
    runs.append((load, orders, dup_pairs, remain))
rows = [
    ("coupons in stock", lambda l, o, d, r: coupons),
    ("orders issued (coupon_order rows)", lambda l, o, d, r: o),
    ("duplicate (user, campaign) pairs", lambda l, o, d, r: d),
    ("final remain", lambda l, o, d, r: r),
    ("claims the app was told succeeded", lambda l, o, d, r: l["claimed"]),
    ("'sold out' answers", lambda l, o, d, r: l["sold_out"]),
    ("'already claimed' answers", lambda l, o, d, r: l["duplicate"]),
    ("other errors", lambda l, o, d, r: l["other_errors"]),
    ("claims/s", lambda l, o, d, r: f"{l['claims_per_s']:.0f}"),
    ("latency p99 (ms)", lambda l, o, d, r: f"{l['latency_ms']['p99']:.1f}"),
]
print(f"{'':36}{'direct to MariaDB':>20}{'through claimguard':>22}")
for label, value in rows:
    print(f"{label:36}{value(*runs[0]):>20}{value(*runs[1]):>22}")
for (load, orders, _, _), name in zip(runs, ("direct", "through claimguard")):
    if orders > coupons:
        print(f"{name}: OVER-ISSUE, {orders - coupons} coupons more than the {coupons} planned")
    for e in load["errors"][:3]:
        print(f"{name}: {e['statement']} got error {e['code']} x{e['count']}: {e['message']}")
EOF
