#!/usr/bin/env bash
# Fault soak (tests/soak/soak.py): the model test's generated apps through 8 sidecars while a seeded schedule
# applies faults (sidecar SIGKILL/SIGSTOP, MariaDB kill -9 and restart, Redis kill/SIGSTOP, TCP RST and DROP
# on the sidecar->database and sidecar->Redis links, lock waits, a slow Redis); the promises checked after
# every round.
#
#   scripts/soak.sh --minutes N --seed S [--round-seconds R] [--sidecars 8] [--faults kind,kind] [--rounds K]
#   scripts/soak.sh --seed S --replay ROUND        exactly that round again (its apps and fault schedule)
#   [--claimguard PATH] [--work-dir DIR] [--parallel 2] [--verbose] [--known-open] [--plan]
#
# Needs root: the servers, the sidecars and the apps run in a network namespace this script creates
# (ip netns add claimguard-soak-PID; removed on exit), where iptables cuts the links (scripts/setup.sh
# installs iptables). Prints one row per round and, for a failing round, its replay command; each round's
# apps and faults are logged in the work dir (round-R.log). Exit 0: no violation; 1: some; 2: harness error;
# 77: cannot run here (not root, ip or iptables missing), said why.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
claimguard="$repo/build/proxy/claimguard"
work="${TMPDIR:-/tmp}/claimguard-soak-$$"
minutes=""
seed=1
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --claimguard) claimguard="$2"; shift 2 ;;
    --work-dir) work="$2"; shift 2 ;;
    --minutes) minutes="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --rounds|--replay|--round-seconds|--sidecars|--faults|--parallel|--first-round|--deadline)
      args+=("$1" "$2"); shift 2 ;;
    --verbose|--known-open|--plan) args+=("$1"); shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n $minutes ]] && args+=(--minutes "$minutes")
if [[ $(id -u) -ne 0 ]]; then
  echo "soak.sh: needs root (it creates a network namespace and sets iptables rules in it); run it with sudo" >&2
  exit 77
fi
for tool in ip iptables; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "soak.sh: $tool is missing: run scripts/setup.sh (it installs iproute2 and iptables)" >&2
    exit 77
  fi
done
[[ -x $claimguard ]] || { echo "soak.sh: no claimguard binary at $claimguard (build it, or --claimguard PATH)" >&2; exit 2; }
py=/usr/bin/python3
[[ -x $py ]] || py=python3

ns="claimguard-soak-$$"
ip netns add "$ns"
trap 'ip netns del "$ns" 2>/dev/null || true' EXIT
ip netns exec "$ns" ip link set lo up
echo "soak.sh: network namespace $ns, work dir $work, $claimguard"
# Not exec: the trap removes the namespace when the driver ends (the driver stops its servers itself).
set +e
ip netns exec "$ns" "$py" "$repo/tests/soak/soak.py" --claimguard "$claimguard" --work-dir "$work" \
  --seed "$seed" "${args[@]}"
rc=$?
exit $rc
