#!/usr/bin/env bash
# Fusor's outputs (unfused and max-fusion plans) lie within the parity tolerance of a float64
# evaluation of the same filled model (tools/float64_parity.py), and the check can fail: outputs
# computed for another input are reported as DIFFERS.
#   float64_parity_test.sh FUSOR PYTHON3 TOOL MODEL.onnx WORK_DIR
set -euo pipefail
fusor="$1" python="$2" tool="$3" model="$4" work="$5"
rm -rf "$work"
mkdir -p "$work"
"$python" - "$model" "$work" <<'PY'
import sys, numpy as np, onnx
m = onnx.load(sys.argv[1], load_external_data=False)
dims = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
for seed in (1, 2):
    x = np.random.default_rng(seed).uniform(-1, 1, dims).astype(np.float32)
    np.save("%s/input_%d.npy" % (sys.argv[2], seed), x)
PY
name="$("$python" -c "import onnx, sys; print(onnx.load(sys.argv[1], load_external_data=False).graph.input[0].name)" "$model")"
run() {  # run SEED OUTDIR [fusor run flags...]
  local seed="$1" out="$2"
  shift 2
  "$fusor" run "$model" --weights --threads 2 --no-timing --input "$name=$work/input_$seed.npy" \
    --output-dir "$work/$out" --output-format npy "$@" > /dev/null
}
run 1 unfused --unfused
run 1 fused
run 2 other_input --unfused
"$python" "$tool" "$model" "$name=$work/input_1.npy" unfused="$work/unfused" fused="$work/fused"
if "$python" "$tool" "$model" "$name=$work/input_1.npy" other_input="$work/other_input"; then
  echo "FAIL: outputs of another input were not reported as DIFFERS" >&2
  exit 1
fi
