#!/usr/bin/env bash
# One model made ready for the peer tools (run.sh, profile.sh): its stripped weights filled with
# seeded data scaled by fan-in (tools/fill_weights.py) into WORK_DIR/NAME.onnx, and tuned on this
# machine (`fusor tune --save-plan WORK_DIR/NAME.plan.json`, the tuning database
# WORK_DIR/tuning.db, calibrated once with a generous time limit). Prints the model's
# peer_bench / group_profile spec, "FILLED.onnx[=PLAN.json][@dim=V,...]" (without the plan when
# the tune fails, which it reports on stderr). Files already in WORK_DIR are reused (a filled
# model only while it is newer than tools/fill_weights.py).
#
#   bench/peers/prepare.sh WORK_DIR MODEL.onnx
#
# A model's symbolic dims are bound from PEER_DIMS (default "batch=1,seq=128"): the names the
# model's inputs use, for both the tune and the run.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$1"
model="$2"
mkdir -p "$work"
python=/usr/bin/python3
[ -x "$python" ] || python=python3
# On a busy host the tuner's default 60 s of calibration is too short.
if [ ! -f "$work/tuning.db" ]; then
  "$root/build/client/fusor" calibrate --db "$work/tuning.db" \
    --time-limit "${FUSOR_CALIBRATE_SECONDS:-300}" > "$work/calibrate.log" 2>&1 ||
    echo "calibration failed: $(tail -1 "$work/calibrate.log")" >&2
fi
name="$(basename "$model" .onnx)"
filled="$work/$name.onnx"
# Filled again when older than the fill script, so a changed fill rule never leaves old weights.
fill="$root/tools/fill_weights.py"
[ "$filled" -nt "$fill" ] || "$python" "$fill" "$model" "$filled" >&2 || exit 1
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
plan="$work/$name.plan.json"
if [ -f "$plan" ] || "$root/build/client/fusor" tune "$filled" --db "$work/tuning.db" \
     "${dim_flags[@]}" --save-plan "$plan" > "$work/$name.tune.log" 2>&1; then
  echo "$filled=$plan${bound:+@$bound}"
else
  echo "$name: fusor tune failed: $(tail -1 "$work/$name.tune.log")" >&2
  echo "$filled${bound:+@$bound}"
fi
