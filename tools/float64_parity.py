# Judges float32 runtimes against a float64 evaluation of the same ONNX CNN, with the parity rule
# of runtime/host_tensor.h Compare (worst |got - want| / (1e-4 max|want| + 1e-3 |want|), <= 1
# passes). The reference interpreter sums in double but stores float32 and is C++ of its own; this
# says independently how far each run, Fusor's, the reference's (as a run's outputs) or ONNX
# Runtime's, is from the exact value: on LR-ASPP with the fan-in-scaled fill float32 runtimes land
# near the tolerance (docs/benchmarks.md, "Parity and float32").
#
#   /usr/bin/python3 tools/float64_parity.py MODEL.onnx NAME=INPUT.npy... LABEL=OUTDIR...
#
# NAME=INPUT.npy: a graph input's value (float32, as given to `fusor run --input NAME=...`).
# LABEL=OUTDIR: a run's outputs as output_K.npy (`fusor run --output-dir OUTDIR --output-format
# npy`); LABEL=ort runs ONNX Runtime (if importable) instead. Covers the ops of the CNNs used for
# parity (Conv, Gemm, Relu, Clip, HardSigmoid, Sigmoid, Mul, Add, MaxPool, GlobalAveragePool,
# linear Resize, shape arithmetic); any other op is refused by name. Exits 1 when a run DIFFERS.
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def conv(x, w, b, a):
    n, c = x.shape[:2]
    m, cg, kh, kw = w.shape
    g = a.get("group", 1)
    s, d = a.get("strides", [1, 1]), a.get("dilations", [1, 1])
    p = a.get("pads", [0, 0, 0, 0])
    x = np.pad(x, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    oh = (x.shape[2] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (x.shape[3] - d[1] * (kw - 1) - 1) // s[1] + 1
    patches = np.empty((n, c, kh, kw, oh, ow), x.dtype)
    for i in range(kh):
        for j in range(kw):
            patches[:, :, i, j] = x[:, :, i * d[0]:i * d[0] + s[0] * (oh - 1) + 1:s[0],
                                    j * d[1]:j * d[1] + s[1] * (ow - 1) + 1:s[1]]
    patches = patches.reshape(n, g, cg, kh, kw, oh, ow)
    y = np.einsum("ngcijhw,gmcij->ngmhw", patches, w.reshape(g, m // g, cg, kh, kw),
                  optimize=True).reshape(n, m, oh, ow)
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def resize_linear(x, a, sizes):
    if a.get("mode", b"nearest") != b"linear" or a.get(
            "coordinate_transformation_mode", b"half_pixel") != b"half_pixel":
        raise SystemExit("Resize: only mode linear with half_pixel coordinates is covered")
    for axis in range(2, x.ndim):
        n_in, n_out = x.shape[axis], int(sizes[axis])
        src = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
        lo = np.floor(src).astype(int)
        hi = np.minimum(lo + 1, n_in - 1)
        shape = [1] * x.ndim
        shape[axis] = n_out
        f = (src - lo).reshape(shape)
        x = np.take(x, lo, axis=axis) * (1 - f) + np.take(x, hi, axis=axis) * f
    return x


def max_pool(x, a):
    k, s = a["kernel_shape"], a.get("strides", [1, 1])
    p = a.get("pads", [0, 0, 0, 0])
    if a.get("dilations", [1, 1]) != [1, 1] or len(k) != 2:
        raise SystemExit("MaxPool: only 2-D windows without dilation are covered")
    out = []
    for axis in (0, 1):
        span = x.shape[2 + axis] + p[axis] + p[axis + 2] - k[axis]
        n = (-(-span // s[axis]) if a.get("ceil_mode", 0) else span // s[axis]) + 1
        if a.get("ceil_mode", 0) and (n - 1) * s[axis] >= x.shape[2 + axis] + p[axis]:
            n -= 1  # ONNX drops a last window that starts in the end padding.
        out.append(n)
    extra = [max(0, (out[d] - 1) * s[d] + k[d] - x.shape[2 + d] - p[d]) for d in (0, 1)]
    x = np.pad(x, ((0, 0), (0, 0), (p[0], extra[0]), (p[1], extra[1])), constant_values=-np.inf)
    y = np.full(x.shape[:2] + tuple(out), -np.inf)
    for i in range(k[0]):
        for j in range(k[1]):
            y = np.maximum(y, x[:, :, i:i + s[0] * (out[0] - 1) + 1:s[0],
                                j:j + s[1] * (out[1] - 1) + 1:s[1]])
    return y


def gemm(i, a):
    x = i[0].T if a.get("transA", 0) else i[0]
    w = i[1].T if a.get("transB", 0) else i[1]
    y = a.get("alpha", 1.0) * (x @ w)
    return y if len(i) < 3 or i[2] is None else y + a.get("beta", 1.0) * i[2]


def evaluate(node, i, a):
    op = node.op_type
    if op == "Conv":
        return conv(i[0], i[1], i[2] if len(i) > 2 else None, a)
    if op == "Resize":
        return resize_linear(i[0], a, i[3])
    if op == "Slice":
        if len(i) > 3 and i[3] is not None and list(i[3]) != [0]:
            raise SystemExit("Slice: only axis 0 is covered")
        return i[0][int(i[1][0]):int(i[2][0])]
    if op == "Constant":
        return numpy_helper.to_array(a["value"])
    simple = {
        "Relu": lambda: np.maximum(i[0], 0),
        "Clip": lambda: np.clip(i[0], -np.inf if len(i) < 2 or i[1] is None else i[1],
                                np.inf if len(i) < 3 or i[2] is None else i[2]),
        "MaxPool": lambda: max_pool(i[0], a),
        "Gemm": lambda: gemm(i, a),
        "Flatten": lambda: i[0].reshape(int(np.prod(i[0].shape[:a.get("axis", 1)])), -1),
        "Reshape": lambda: i[0].reshape([d if d != 0 else i[0].shape[k]
                                         for k, d in enumerate(i[1].tolist())]),
        "HardSigmoid": lambda: np.clip(a.get("alpha", 0.2) * i[0] + a.get("beta", 0.5), 0, 1),
        "Sigmoid": lambda: 0.5 * (1 + np.tanh(0.5 * i[0])),
        "Mul": lambda: i[0] * i[1],
        "Add": lambda: i[0] + i[1],
        "GlobalAveragePool": lambda: i[0].mean(axis=tuple(range(2, i[0].ndim)), keepdims=True),
        "Identity": lambda: i[0],
        "Shape": lambda: np.array(i[0].shape, np.int64),
        "Concat": lambda: np.concatenate(i, axis=a["axis"]),
    }
    if op not in simple:
        raise SystemExit("node '%s': op %s is not covered by this float64 evaluator" %
                         (node.name, op))
    return simple[op]()


def float64_outputs(model, feeds):
    as64 = lambda v: v.astype(np.float64) if v.dtype.kind == "f" else v
    values = {t.name: as64(numpy_helper.to_array(t)) for t in model.graph.initializer}
    values.update({k: as64(v) for k, v in feeds.items()})
    for node in model.graph.node:
        a = {at.name: onnx.helper.get_attribute_value(at) for at in node.attribute}
        inputs = [values[n] if n else None for n in node.input]
        values[node.output[0]] = as64(np.asarray(evaluate(node, inputs, a)))
    return [values[o.name] for o in model.graph.output]


def worst_ratio(want, got, rtol=1e-3, rel_atol=1e-4):
    """runtime/host_tensor.h Compare: <= 1 is within tolerance."""
    atol = max(rel_atol * np.abs(want).max(), 1e-30)
    r = np.abs(want - got) / (atol + rtol * np.abs(want))
    k = int(r.argmax())
    return r.flat[k], k, want.flat[k], got.flat[k]


def run_ort(path, feeds):
    import onnxruntime
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 2
    return onnxruntime.InferenceSession(path, options).run(None, feeds)


def main():
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print("usage: float64_parity.py MODEL.onnx NAME=INPUT.npy... LABEL=OUTDIR...")
        sys.exit(0 if args else 2)
    model = onnx.load(args[0])
    input_names = {i.name for i in model.graph.input}
    feeds, runs = {}, {}
    for arg in args[1:]:
        name, _, path = arg.partition("=")
        (feeds if name in input_names else runs)[name] = path
    missing = input_names - feeds.keys() - {t.name for t in model.graph.initializer}
    if missing:
        raise SystemExit("no value for graph input(s) %s: give NAME=INPUT.npy" % sorted(missing))
    feeds = {k: np.load(v) for k, v in feeds.items()}
    exact = float64_outputs(model, feeds)
    differs = False
    for label, where in runs.items():
        if label == "ort":
            got = run_ort(args[0], feeds)
        else:
            got = [np.load(os.path.join(where, "output_%d.npy" % k)) for k in range(len(exact))]
        for k, (want, g) in enumerate(zip(exact, got)):
            r, e, w, v = worst_ratio(want, g.astype(np.float64))
            print("%-12s output %d vs float64: worst ratio %.3g %s (element %d: exact %.6g, got "
                  "%.6g)" % (label, k, r, "ok" if r <= 1 else "DIFFERS", e, w, v))
            differs |= not r <= 1
    sys.exit(1 if differs else 0)


main()
