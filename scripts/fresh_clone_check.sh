#!/usr/bin/env bash
# What a new user gets on this machine: clone the repository into a temporary folder, then run
# the README's two commands there with an empty pip cache (set-up + tests, then the main job),
# and report the time of each with the CPU model and instruction sets.
#
#   scripts/fresh_clone_check.sh [--keep] [--skip-demo] [REPO]   (REPO: default this checkout)
#
# The clone is of the committed HEAD (uncommitted changes are not in it). Exit status: that of
# the first command that failed. The report is printed and written to out/fresh-clone-<date>.txt,
# the three commands' whole logs beside it. Takes about 20 minutes on the AVX2 machine.
set -uo pipefail

keep=0 demo=1 repo=""
for arg in "$@"; do
  case "$arg" in
    --keep) keep=1 ;;
    --skip-demo) demo=0 ;;
    -h|--help) sed -n 2,9p "$0"; exit 0 ;;
    *) repo="$arg" ;;
  esac
done
here="$(cd "$(dirname "$0")/.." && pwd)"
repo="${repo:-$here}"
work="$(mktemp -d /tmp/llm-planner-fresh.XXXXXX)"
report="$here/out/fresh-clone-$(date +%Y%m%d-%H%M%S).txt"  # logs: out/fresh-clone-<time>-{setup,tests,demo}.log
mkdir -p "$here/out"
cleanup() { if [ "$keep" = 0 ]; then rm -rf "$work"; else echo "kept $work"; fi; }
trap cleanup EXIT

# An empty pip cache and no pip config from the user; DDS stays on this machine.
export PIP_CACHE_DIR="$work/pip-cache"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-62}"

cpu_model="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
cpu_sets="$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|avx512f|avx512_bf16|amx_bf16' | tr '\n' ' ')"

step() {  # step NAME LOG COMMAND...: run, time, and remember the result
  local name="$1" log="$2"; shift 2
  local started=$SECONDS
  echo "== $name: $* (log: $log)"
  "$@" > "$log" 2>&1
  local rc=$?
  local took=$((SECONDS - started))
  results+=("$(printf '%-8s %4d min %02d s  exit %d' "$name" $((took / 60)) $((took % 60)) "$rc")")
  tail -n 15 "$log"
  return "$rc"
}

results=()
status=0
git clone --quiet "$repo" "$work/llm_planner" || exit 1
cd "$work/llm_planner"
commit="$(git rev-parse --short HEAD)"
step setup "$work/setup.log" make setup || status=$?
if [ "$status" = 0 ]; then
  step tests "$work/tests.log" make test || status=$?
  if [ "$demo" = 1 ]; then
    step demo "$work/demo.log" make demo || { rc=$?; [ "$status" = 0 ] && status=$rc; }
  fi
fi
stamp="$(date +%Y%m%d-%H%M%S)"
for log in setup tests demo; do  # the whole logs stay beside the report
  [ -f "$work/$log.log" ] && cp "$work/$log.log" "$here/out/fresh-clone-$stamp-$log.log"
done
summary="$(grep -E '^[0-9]+ (passed|failed)|^=+ .*(passed|failed)' "$work/tests.log" 2>/dev/null | tail -n 1)"

{
  echo "fresh clone of $repo at $commit, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "CPU: $cpu_model; $(nproc) cores; instruction sets: ${cpu_sets:-none of avx2/avx512f/avx512_bf16/amx_bf16}"
  printf '%s\n' "${results[@]}"
  [ -n "$summary" ] && echo "tests: $summary"
  echo "result: $([ "$status" = 0 ] && echo PASS || echo "FAIL (exit $status)")"
} | tee "$report"
echo "report: $report"
exit "$status"
