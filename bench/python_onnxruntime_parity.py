# The same feed through onnxruntime.InferenceSession and fusor.InferenceSession on every bundled
# model, filled with weights by tools/fill_weights.py, and each output's error:
#   max |fusor - onnxruntime| / max |onnxruntime|
# (relative to the output's largest magnitude, as tests/python's parity test judges it: an
# element-wise relative error is meaningless for outputs near zero). Goal: under 1e-4 on every model.
# Beside it, what makes that figure meaningful, both from onnxruntime:
#   two-input difference: the outputs of a second seeded feed against the first's, as
#     RelativeDifference (runtime/host_tensor.h) takes it, max |a - b| / max |a| over every output;
#     at most 1e-2 (kMinInputSensitivity) the weights wash the input out and parity sees little of
#     the network;
#   max |activation|: the largest finite magnitude of any float value the network computes (every
#     node's output made a graph output); far above 1e4, float32 rounding of a sum is wider than
#     a Sigmoid's step, and two correct runtimes may disagree anywhere (docs/python.md).
# Run with the build's package and the interpreter it was built for:
#   PYTHONPATH=build/python /usr/bin/python3 bench/python_onnxruntime_parity.py \
#       [--filled-dir build/filled_models] [--threads N] [MODEL ...]
# A model not yet filled in --filled-dir is filled there first. Symbolic dims are bound to the
# values in SYMBOLIC_DIMS (1 for any other), for both runtimes. Prints one row per model and output
# and a Markdown table of the worst output per model (docs/python.md keeps it); exits 1 when a
# model is over the bound, its two inputs are within MIN_INPUT_SENSITIVITY, or it fails to run.
import argparse
import pathlib
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime

import fusor

ROOT = pathlib.Path(__file__).resolve().parent.parent
BOUND = 1e-4
MIN_INPUT_SENSITIVITY = 1e-2  # kMinInputSensitivity, runtime/host_tensor.h
SYMBOLIC_DIMS = {"batch": 2, "seq": 16, "sequence": 16, "time": 16}


def filled(model, filled_dir):
    """The model with its weights filled by tools/fill_weights.py, made again when missing or
    older than the fill script (a changed fill rule must not leave old weights behind)."""
    out = filled_dir / model.name
    fill = ROOT / "tools" / "fill_weights.py"
    if not out.exists() or out.stat().st_mtime < fill.stat().st_mtime:
        subprocess.run([sys.executable, str(fill), str(model), str(out)], check=True,
                       stdout=subprocess.DEVNULL)
    return out


def bound_dims(reference):
    """The symbolic dims of the model's inputs (onnxruntime names them as strings) with values."""
    names = {d for i in reference.get_inputs() for d in i.shape if isinstance(d, str)}
    return {n: SYMBOLIC_DIMS.get(n, 1) for n in names}


def feed_for(reference, dims, seed=0):
    """Seeded: floats in [-1, 1], integers (token ids) in [0, 100), as tests/python's feeds."""
    rng = np.random.default_rng(seed)
    feed = {}
    for i in reference.get_inputs():
        shape = [dims[d] if isinstance(d, str) else d for d in i.shape]
        if i.type in ("tensor(float)", "tensor(double)", "tensor(float16)"):
            dtype = {"tensor(float)": np.float32, "tensor(double)": np.float64}.get(i.type,
                                                                                    np.float16)
            feed[i.name] = rng.uniform(-1, 1, shape).astype(dtype)
        else:
            dtype = np.int32 if i.type == "tensor(int32)" else np.int64
            feed[i.name] = rng.integers(0, 100, shape).astype(dtype)
    return feed


def relative_error(ours, theirs):
    if ours.shape != theirs.shape:
        raise ValueError(f"shape {ours.shape}, onnxruntime's {theirs.shape}")
    if ours.dtype.kind not in "fc":
        return float(np.any(ours != theirs))
    scale = float(np.max(np.abs(theirs))) if theirs.size else 0.0
    diff = float(np.max(np.abs(ours.astype(np.float64) - theirs))) if theirs.size else 0.0
    return diff / (scale or 1.0)


def relative_difference(a, b):
    """max |a - b| / max |a| over every float output, as RelativeDifference."""
    pairs = [(x.astype(np.float64), y) for x, y in zip(a, b) if x.dtype.kind == "f" and x.size]
    diff = max((float(np.max(np.abs(x - y))) for x, y in pairs), default=0.0)
    scale = max((float(np.max(np.abs(x))) for x, _ in pairs), default=0.0)
    return diff / scale if scale else 0.0


def largest_activation(path, options, feed):
    """(max |value|, the node whose output it is) over every float value the model computes, by
    onnxruntime with each node's output made a graph output."""
    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    types = {v.name: v.type.tensor_type.elem_type
             for v in list(model.graph.value_info) + list(model.graph.output)}
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16}
    producer = {out: n.name or n.op_type for n in model.graph.node for out in n.output}
    known = {o.name for o in model.graph.output}
    for name, elem in types.items():
        if elem in floats and name in producer and name not in known:
            model.graph.output.append(onnx.helper.make_tensor_value_info(name, elem, None))
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    largest, where = 0.0, ""
    for name, value in zip(names, session.run(names, feed)):
        if value.dtype.kind != "f" or not value.size:
            continue
        # An attention mask's -inf is by design; a NaN is the largest of all.
        finite = np.abs(value[~np.isinf(value)])
        m = float(np.max(finite)) if finite.size else 0.0
        if not m <= largest:
            largest, where = m, producer.get(name, name)
    return largest, where


def compare(path, threads):
    """[(output name, relative error)] of one model, its two-input difference, its largest
    activation with the node that computes it, and the seconds it took."""
    start = time.perf_counter()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    reference = onnxruntime.InferenceSession(str(path), options,
                                             providers=["CPUExecutionProvider"])
    dims = bound_dims(reference)
    ours = fusor.InferenceSession(str(path), threads=threads, dims=dims)
    feed = feed_for(reference, dims)
    names = [o.name for o in reference.get_outputs()]
    want = reference.run(names, feed)
    rows = [(name, relative_error(a, b)) for name, a, b in zip(names, ours.run(names, feed), want)]
    sensitivity = relative_difference(want, reference.run(names, feed_for(reference, dims, 1)))
    largest = largest_activation(path, options, feed)
    return rows, sensitivity, largest, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("models", nargs="*", help="model names under models/ (default: all)")
    parser.add_argument("--filled-dir", type=pathlib.Path, default=ROOT / "build" / "filled_models")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    args.filled_dir.mkdir(parents=True, exist_ok=True)
    models = ([ROOT / "models" / f"{m}.onnx" for m in args.models] if args.models
              else sorted((ROOT / "models").glob("*.onnx")))
    print(f"onnxruntime {onnxruntime.__version__}, {args.threads} thread(s)", flush=True)
    table, failed = [], False
    for model in models:
        try:
            rows, sensitivity, (largest, where), seconds = compare(
                filled(model, args.filled_dir), args.threads)
        except Exception as e:  # A model that does not run is a row of the table, not the end.
            print(f"{model.stem}: FAILED: {type(e).__name__}: {e}", flush=True)
            table.append((model.stem, None, None, None, f"fails: {e}"))
            failed = True
            continue
        for name, err in rows:
            print(f"{model.stem:<24} {name:<20} {err:.2e}", flush=True)
        worst = max(err for _, err in rows)
        ok = worst <= BOUND and sensitivity > MIN_INPUT_SENSITIVITY
        failed |= not ok
        table.append((model.stem, largest, sensitivity, worst, "yes" if ok else "no"))
        print(f"  two inputs {sensitivity:.2e} apart, max |activation| {largest:.2e} ({where}), "
              f"{seconds:.1f} s", flush=True)
    print("\n| model | max abs activation | two-input difference | max rel err | "
          "within 1e-4, inputs > 1e-2 apart |\n|---|---|---|---|---|")
    for model, largest, sensitivity, worst, verdict in table:
        cells = ["-" if v is None else f"{v:.1e}" for v in (largest, sensitivity, worst)]
        print(f"| {model} | {' | '.join(cells)} | {verdict} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
