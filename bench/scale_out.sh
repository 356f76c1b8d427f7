#!/usr/bin/env bash
# Scale-out figures on one machine (docs/scale-out.md): starts a scratch PostgreSQL in WORK_DIR
# (Debian's postgresql-15, as deploy/install-deps.sh installs it), measures the measurement-job
# queue (bench/job_queue_bench) on a SQLite file and on PostgreSQL, then starts two fusord
# replicas on that PostgreSQL (loopback ports) and a measurement agent, tunes one graph through
# the agent, and measures GetPlan QPS (bench/grpc_load) against one replica and against both with
# the same total client threads. Everything it starts is stopped on exit, however it exits.
#   bench/scale_out.sh WORK_DIR [BUILD_DIR]
# Environment: THREADS (GetPlan client threads, 8), SECONDS_PER_RUN (10), JOBS (500),
# AGENTS (4, leasing threads of the queue bench), ROUNDS (3), CALIBRATION_S (300: the time limit
# of this machine's one calibration, generous for a loaded host), PORT_A / PORT_B (7171 / 7172).
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 WORK_DIR [BUILD_DIR]" >&2
  exit 2
fi
WORK=$(mkdir -p "$1" && cd "$1" && pwd)
BUILD=${2:-$(dirname "$0")/../build}
BUILD=$(cd "$BUILD" && pwd)
THREADS=${THREADS:-8}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
JOBS=${JOBS:-500}
AGENTS=${AGENTS:-4}
ROUNDS=${ROUNDS:-3}
CALIBRATION_S=${CALIBRATION_S:-300}
PORT_A=${PORT_A:-7171}
PORT_B=${PORT_B:-7172}
FUSORD=$BUILD/server/fusord
FUSOR=$BUILD/client/fusor
for tool in "$FUSORD" "$FUSOR" "$BUILD/bench/grpc_load" "$BUILD/bench/job_queue_bench"; do
  [[ -x $tool ]] || { echo "$0: $tool is missing: build fusord fusor grpc_load job_queue_bench" >&2; exit 1; }
done

source "$(dirname "$0")/lib/scratch_postgres.sh"

rm -rf "$WORK/queue.db"* "$WORK/agent.db"*
start_postgres
psql_pg "CREATE DATABASE fusor"
psql_pg "CREATE DATABASE queue"

echo "# $(date -u '+%F %T UTC'), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "## job queue: SQLite file"
run "$BUILD/bench/job_queue_bench" --db "$WORK/queue.db" --jobs "$JOBS" --agents "$AGENTS" --rounds "$ROUNDS"
echo "## job queue: PostgreSQL"
run "$BUILD/bench/job_queue_bench" --db "$(uri queue)" --jobs "$JOBS" --agents "$AGENTS" --rounds "$ROUNDS"

cat >"$WORK/tokens" <<'EOF'
scaleout-readtune-0123456789 read,tune bench
scaleout-agent-0123456789 agent agent
scaleout-admin-0123456789 admin operator
EOF
chmod 600 "$WORK/tokens"
echo scaleout-agent-0123456789 >"$WORK/agent-token"
chmod 600 "$WORK/agent-token"
TOKEN=scaleout-readtune-0123456789

start_fusord() {  # NAME PORT
  "$FUSORD" --db "$(uri fusor)" --listen "127.0.0.1:$2" \
    --token-file "$WORK/tokens" --measure-on-agents --agent-lease 10 --agent-poll 1 \
    --calibration-time-limit "$CALIBRATION_S" --shutdown-grace 2 >"$WORK/$1.log" 2>&1 &
  PIDS+=($!)
}
start_fusord replica-a "$PORT_A"
wait_serving "$PORT_A" "$TOKEN"
start_fusord replica-b "$PORT_B"
wait_serving "$PORT_B" "$TOKEN"

# This machine is calibrated once: into the agent's own database, and registered at the replicas
# as their own CPU's profile, so neither the agent nor a replica calibrates again.
echo "## agent: calibrating this machine (its own database), registering the profile, measuring for replica B"
run "$FUSOR" calibrate --db "$WORK/agent.db" --time-limit "$CALIBRATION_S" \
  --out "$WORK/profile.json" >"$WORK/calibrate.log" 2>&1 || { echo "$0: calibration failed; see $WORK/calibrate.log" >&2; exit 1; }
FUSOR_TOKEN=scaleout-admin-0123456789 run "$FUSOR" targets register "$WORK/profile.json" --server "127.0.0.1:$PORT_A"
"$FUSOR" agent --server "127.0.0.1:$PORT_B" --token-file "$WORK/agent-token" \
  --local-db "$WORK/agent.db" --name scale-out-agent --poll 1 >"$WORK/agent.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 60); do grep -q "measuring for target" "$WORK/agent.log" && break; sleep 0.5; done
grep "measuring for target" "$WORK/agent.log" || { echo "$0: the agent did not register; see $WORK/agent.log" >&2; exit 1; }

# grpc_load's first call tunes its graph at replica A; replica A queues the measurement, the
# agent (polling replica B) takes it, and every later GetPlan is a cache hit from either replica.
# One replica and two, alternating, so a change in the host's load hits both alike.
for round in 1 2; do
  echo "## GetPlan round $round: one replica, $THREADS client threads (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  FUSOR_TOKEN=$TOKEN run "$BUILD/bench/grpc_load" --server "127.0.0.1:$PORT_A" --threads "$THREADS" \
    --seconds "$SECONDS_PER_RUN" --tune-graphs 0
  echo "## GetPlan round $round: two replicas on one PostgreSQL, $THREADS client threads in all (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  FUSOR_TOKEN=$TOKEN run "$BUILD/bench/grpc_load" --server "127.0.0.1:$PORT_A,127.0.0.1:$PORT_B" \
    --threads "$THREADS" --seconds "$SECONDS_PER_RUN" --tune-graphs 0
done
echo "## the seeding Tune's measurement: the agent that took it"
as_pg psql -h "$WORK/pg" -p "$PG_PORT" -U postgres -d fusor -At \
  -c "SELECT state, agent_id, lease FROM measurement_jobs ORDER BY job_id"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
