#!/usr/bin/env bash
# The peer bench end to end: fills each model's stripped weights (tools/fill_weights.py), tunes it
# on this machine (`fusor tune --save-plan`, a tuning database in WORK_DIR), then runs
# build/bench/peer_bench on all of them: parity with the reference interpreter, then ONNX Runtime
# against Fusor's tuned plan in alternating rounds, 2 threads each.
#
#   bench/peers/run.sh WORK_DIR MODEL.onnx...      (e.g. ../shared/models/*.onnx)
#
# A model's symbolic dims are bound from PEER_DIMS (default "batch=1,seq=128"): the names the
# model's inputs use, for both the tune and the run.
# Needs a build (build/client/fusor, build/bench/peer_bench) and deploy/install-peers.sh.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$1"
shift
mkdir -p "$work"
"$root/deploy/install-peers.sh"
python=/usr/bin/python3
[ -x "$python" ] || python=python3
# Calibrate once with a generous time limit: on a busy host the tuner's default 60 s is too short.
if [ ! -f "$work/tuning.db" ]; then
  "$root/build/client/fusor" calibrate --db "$work/tuning.db" \
    --time-limit "${FUSOR_CALIBRATE_SECONDS:-300}" > "$work/calibrate.log" 2>&1 ||
    echo "calibration failed: $(tail -1 "$work/calibrate.log")"
fi
specs=()
for model in "$@"; do
  name="$(basename "$model" .onnx)"
  filled="$work/$name.onnx"
  [ -f "$filled" ] || "$python" "$root/tools/fill_weights.py" "$model" "$filled" || continue
  # The PEER_DIMS bindings whose names are symbolic dims of this model's inputs.
  bound="$("$python" - "$filled" "${PEER_DIMS:-batch=1,seq=128}" <<'PY'
import sys, onnx
model = onnx.load(sys.argv[1], load_external_data=False)
params = {d.dim_param for i in model.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}
print(",".join(b for b in sys.argv[2].split(",") if b.split("=")[0] in params))
PY
)"
  dim_flags=()
  for b in ${bound//,/ }; do dim_flags+=(--dim "$b"); done
  if "$root/build/client/fusor" tune "$filled" --db "$work/tuning.db" "${dim_flags[@]}" \
       --save-plan "$work/$name.plan.json" > "$work/$name.tune.log" 2>&1; then
    specs+=("$filled=$work/$name.plan.json${bound:+@$bound}")
  else
    echo "$name: fusor tune failed: $(tail -1 "$work/$name.tune.log")"
    specs+=("$filled${bound:+@$bound}")
  fi
done
exec "$root/build/bench/peer_bench" --threads 2 --rounds "${PEER_ROUNDS:-10}" "${specs[@]}"
