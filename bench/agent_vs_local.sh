#!/usr/bin/env bash
# Does a Tune measured on an agent store what a local tune stores? (#46's experiment.) Starts a
# scratch PostgreSQL in WORK_DIR, two fusord replicas on it (loopback ports, --measure-on-agents)
# and one measurement agent of this machine; then, RUNS times per model, tunes the model through
# replica A (the agent measures) and locally (`fusor tune --db`, the same calibration), both with
# --force, and times the two stored plans against each other with `fusor run --plan`, alternating
# ROUNDS times. Prints one line per run and a summary per model: group counts, each tune's
# decision, how many groups the two plans share, and the median ratio agent-plan / local-plan time
# with its min and max (1 within noise when the plans are the same).
#   bench/agent_vs_local.sh WORK_DIR [BUILD_DIR] [MODEL.onnx ...]
# Environment: RUNS (5), ROUNDS (3), CALIBRATION_S (300), PORT_A / PORT_B (7181 / 7182).
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 WORK_DIR [BUILD_DIR] [MODEL.onnx ...]" >&2
  exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mkdir -p "$1" && cd "$1" && pwd)
BUILD=$(cd "${2:-$HERE/../build}" && pwd)
shift $(($# >= 2 ? 2 : 1))
MODELS=("$@")
[[ ${#MODELS[@]} -gt 0 ]] || MODELS=("$HERE/../models/mobilenet_v2.onnx" "$HERE/../models/squeezenet1_1.onnx" "$HERE/../models/resnet18.onnx")
RUNS=${RUNS:-5}
ROUNDS=${ROUNDS:-3}
CALIBRATION_S=${CALIBRATION_S:-300}
PORT_A=${PORT_A:-7181}
PORT_B=${PORT_B:-7182}
PG_PORT=${PG_PORT:-5498}
FUSORD=$BUILD/server/fusord
FUSOR=$BUILD/client/fusor
for tool in "$FUSORD" "$FUSOR"; do
  [[ -x $tool ]] || { echo "$0: $tool is missing: build fusord fusor" >&2; exit 1; }
done
source "$HERE/lib/scratch_postgres.sh"

rm -rf "$WORK"/*.db* "$WORK"/plans
mkdir -p "$WORK/plans"
start_postgres
psql_pg "CREATE DATABASE fusor"

cat >"$WORK/tokens" <<'TOKENS'
agentexp-readtune-0123456789 read,tune bench
agentexp-agent-0123456789 agent agent
agentexp-admin-0123456789 admin operator
TOKENS
chmod 600 "$WORK/tokens"
echo agentexp-agent-0123456789 >"$WORK/agent-token"
chmod 600 "$WORK/agent-token"
TOKEN=agentexp-readtune-0123456789

echo "# $(date -u '+%F %T UTC'), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
# One calibration of this machine: the agent's database, a copy for the local tunes, and the
# replicas' profile of their own CPU.
run "$FUSOR" calibrate --db "$WORK/agent.db" --time-limit "$CALIBRATION_S" \
  --out "$WORK/profile.json" >"$WORK/calibrate.log" 2>&1 || { echo "$0: calibration failed; see $WORK/calibrate.log" >&2; exit 1; }
cp "$WORK/agent.db" "$WORK/local.db"

start_fusord() {  # NAME PORT
  "$FUSORD" --db "$(uri fusor)" --listen "127.0.0.1:$2" --token-file "$WORK/tokens" \
    --measure-on-agents --agent-lease 30 --agent-poll 1 --shutdown-grace 2 >"$WORK/$1.log" 2>&1 &
  PIDS+=($!)
}
start_fusord replica-a "$PORT_A"
wait_serving "$PORT_A" "$TOKEN"
start_fusord replica-b "$PORT_B"
wait_serving "$PORT_B" "$TOKEN"
FUSOR_TOKEN=agentexp-admin-0123456789 run "$FUSOR" targets register "$WORK/profile.json" --server "127.0.0.1:$PORT_A" >/dev/null
"$FUSOR" agent --server "127.0.0.1:$PORT_B" --token-file "$WORK/agent-token" \
  --local-db "$WORK/agent.db" --name agentexp --poll 1 >"$WORK/agent.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 60); do grep -q "measuring for target" "$WORK/agent.log" && break; sleep 0.5; done
grep -q "measuring for target" "$WORK/agent.log" || { echo "$0: the agent did not register; see $WORK/agent.log" >&2; exit 1; }

# Group count and decision of a `tune --json` result.
summary() {
  python3 -c 'import json,sys
p=json.load(open(sys.argv[1]))["plan"]; c=p.get("confidence",{})
fused=sum(1 for g in p["groups"] if len(g["nodes"])>1)
print("%d groups (%d fused), %s%s" % (len(p["groups"]), fused, c.get("decision","no decision"), ", UNSTABLE" if c.get("unstable") else ""))' "$1"
}
same_groups() {  # A.json L.json: how many of the local plan's groups the agent's plan has too
  python3 -c 'import json,sys
g=lambda f: {tuple(sorted(x["nodes"])) for x in json.load(open(f))["plan"]["groups"]}
a,l=g(sys.argv[1]),g(sys.argv[2]); print("%d of %d groups equal%s" % (len(a&l), len(l), " (the same plan)" if a==l else ""))' "$1" "$2"
}
total_ms() {  # MODEL PLAN: the whole plan's median time, ms
  "$FUSOR" run "$1" --plan "$2" --threads 0 --min-time-ms 300 2>/dev/null | sed -n 's/^total: \([0-9.]*\) ms.*/\1/p'
}

for model in "${MODELS[@]}"; do
  name=$(basename "$model" .onnx)
  ratios=()
  for r in $(seq 1 "$RUNS"); do
    a=$WORK/plans/$name.agent.$r; l=$WORK/plans/$name.local.$r
    FUSOR_TOKEN=$TOKEN run "$FUSOR" tune "$model" --server "127.0.0.1:$PORT_A" --force --json \
      --save-plan "$a.plan.json" >"$a.json" 2>"$a.log"
    run "$FUSOR" tune "$model" --db "$WORK/local.db" --force --json --save-plan "$l.plan.json" >"$l.json" 2>"$l.log"
    ta=(); tl=()
    for _ in $(seq 1 "$ROUNDS"); do
      ta+=("$(total_ms "$model" "$a.plan.json")")
      tl+=("$(total_ms "$model" "$l.plan.json")")
    done
    ratio=$(python3 -c 'import statistics,sys; a,l=sys.argv[1].split(),sys.argv[2].split(); print("%.3f"%(statistics.median(map(float,a))/statistics.median(map(float,l))))' "${ta[*]}" "${tl[*]}")
    ratios+=("$ratio")
    echo "$name run $r (load $(cut -d' ' -f1 /proc/loadavg)): agent: $(summary "$a.json"); local: $(summary "$l.json"); $(same_groups "$a.json" "$l.json"); agent/local time $ratio (agent ms ${ta[*]}; local ms ${tl[*]})"
  done
  python3 -c 'import statistics,sys; r=[float(x) for x in sys.argv[2:]]; print("## %s: agent-plan / local-plan time, median %.3f (min %.3f, max %.3f) over %d runs" % (sys.argv[1], statistics.median(r), min(r), max(r), len(r)))' "$name" "${ratios[@]}"
done
echo "## measured by: $(as_pg psql -h "$WORK/pg" -p "$PG_PORT" -U postgres -d fusor -At -c "SELECT agent_id, count(*) FROM measurement_jobs GROUP BY agent_id" | tr '\n' ' ')"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
