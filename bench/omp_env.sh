#!/usr/bin/env bash
# Whole-plan time under OpenMP settings, alternating (docs/decisions.md, "The OpenMP environment"):
#   bench/omp_env.sh MODEL.onnx ROUNDS SETTING...     SETTING: default, passive, active, spinN
# (spinN: GOMP_SPINCOUNT=N with no wait policy). Runs `fusor run MODEL --threads 2` (the stored
# tuned plan, or max fusion without one) once per setting per round and prints the total line
# with the load average, so a setting is never timed in a different phase of the host's load.
# Environment: FUSOR (build/client/fusor), THREADS (2), MIN_TIME_MS (400).
set -euo pipefail
if [[ $# -lt 3 ]]; then
  echo "usage: $0 MODEL.onnx ROUNDS SETTING..." >&2
  exit 2
fi
FUSOR=${FUSOR:-$(dirname "$0")/../build/client/fusor}
MODEL=$1 ROUNDS=$2
shift 2
for r in $(seq 1 "$ROUNDS"); do
  for s in "$@"; do
    case $s in
      default) e=(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT) ;;
      passive | active) e=(env -u GOMP_SPINCOUNT "OMP_WAIT_POLICY=$s") ;;
      spin[0-9]*) e=(env -u OMP_WAIT_POLICY "GOMP_SPINCOUNT=${s#spin}") ;;
      *) echo "$0: unknown setting '$s': default, passive, active or spinN" >&2; exit 2 ;;
    esac
    t=$("${e[@]}" "$FUSOR" run "$MODEL" --threads "${THREADS:-2}" --min-time-ms "${MIN_TIME_MS:-400}" 2>&1 |
      sed -n 's/^total: //p')
    echo "$(basename "$MODEL" .onnx) $s round $r load $(cut -d' ' -f1 /proc/loadavg): $t"
  done
done
