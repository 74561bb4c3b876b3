#!/usr/bin/env bash
# Runs the model-based randomized test (tests/model) on fresh seeds for as long as asked.
#
#   bash scripts/model.sh --minutes N [--sidecars 8] [--claimguard PATH] [--work-dir DIR] [model_test.py options]
#
# Default binary: build/proxy/claimguard. KNOWN_OPEN families (tests/model/grammar.py) are excluded unless
# --families is given (e.g. --families all, or --families carrier.view to add one family to the baseline).
# Prints every app run, then "model: A apps over S seeds in T s; F failing"; each failure's shrunk reproducer
# is saved under the work dir's failures/ for `python3 tests/model/model_test.py --replay FILE`.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
minutes=10
sidecars=8
claimguard="$repo/build/proxy/claimguard"
work="${TMPDIR:-/tmp}/claimguard-model-$$"
families_given=0
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    --sidecars) sidecars="$2"; shift 2 ;;
    --claimguard) claimguard="$2"; shift 2 ;;
    --work-dir) work="$2"; shift 2 ;;
    --families) families_given=1; extra+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) extra+=("$1"); shift ;;
  esac
done
if [[ $families_given -eq 0 ]]; then
  extra+=(--exclude-known-open)
fi
py=/usr/bin/python3
[[ -x $py ]] || py=python3
echo "model.sh: $minutes min, $sidecars sidecars, $claimguard, work dir $work"
exec "$py" "$repo/tests/model/model_test.py" --claimguard "$claimguard" --work-dir "$work" \
  --minutes "$minutes" --sidecars "$sidecars" --deadline "$(( ${minutes%.*} * 60 + 900 ))" "${extra[@]}"
