# tools/fill_weights.py on a structure no bundled model has: a ResNet of 60 basic blocks with its
# BatchNormalization nodes kept (torch folds them into the convs on export). The fill reads only
# the graph, so its activations must stay bounded (He's gain on every weight reaches 4e11 here)
# and the outputs of two inputs must differ by more than kMinInputSensitivity (1e-2), both
# judged by onnxruntime with every node's output made a graph output.
#   fill_weights_test.py PYTHON3 FILL_WEIGHTS.py WORK_DIR
# Exits 77 (ctest's skip) when onnxruntime is missing (deploy/install-deps.sh installs it).
import pathlib
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

try:
    import onnxruntime
except ImportError:
    print("onnxruntime is not installed for this Python (deploy/install-deps.sh installs it)")
    sys.exit(77)

BLOCKS, CHANNELS = 60, 32
LARGEST_ACTIVATION = 1e3
MIN_INPUT_SENSITIVITY = 1e-2  # kMinInputSensitivity, runtime/host_tensor.h


def stripped(name, dims):
    """An initializer with dims and no data, as the bundled models' are."""
    t = TensorProto(name=name, data_type=TensorProto.FLOAT)
    t.dims.extend(dims)
    return t


def deep_residual_model():
    nodes, inits = [], []

    def conv_bn(x, cin, name, relu):
        inits.append(stripped(f"{name}.w", [CHANNELS, cin, 3, 3]))
        nodes.append(helper.make_node("Conv", [x, f"{name}.w"], [f"{name}.conv"], pads=[1] * 4))
        stats = [f"{name}.{p}" for p in ("scale", "shift", "mean", "var")]
        inits.extend(stripped(s, [CHANNELS]) for s in stats)
        nodes.append(helper.make_node("BatchNormalization", [f"{name}.conv"] + stats,
                                      [f"{name}.bn"]))
        if not relu:
            return f"{name}.bn"
        nodes.append(helper.make_node("Relu", [f"{name}.bn"], [f"{name}.relu"]))
        return f"{name}.relu"

    x = conv_bn("input", 3, "stem", True)
    for b in range(BLOCKS):
        y = conv_bn(conv_bn(x, CHANNELS, f"b{b}.1", True), CHANNELS, f"b{b}.2", False)
        nodes.append(helper.make_node("Add", [x, y], [f"b{b}.sum"]))
        nodes.append(helper.make_node("Relu", [f"b{b}.sum"], [f"b{b}.out"]))
        x = f"b{b}.out"
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"]))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["features"]))
    inits += [stripped("fc.w", [10, CHANNELS]), stripped("fc.b", [10])]
    nodes.append(helper.make_node("Gemm", ["features", "fc.w", "fc.b"], ["output"], transB=1))
    graph = helper.make_graph(
        nodes, "deep_residual",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def every_value(path, feed):
    model = onnx.load(str(path))
    for n in model.graph.node:
        for out in n.output:
            if out != "output":
                model.graph.output.append(helper.make_tensor_value_info(out, TensorProto.FLOAT,
                                                                        None))
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feed)))


def main():
    python, tool, work = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
    work.mkdir(parents=True, exist_ok=True)
    onnx.save(deep_residual_model(), str(work / "stripped.onnx"))
    subprocess.run([python, tool, str(work / "stripped.onnx"), str(work / "filled.onnx")],
                   check=True)
    feeds = [{"input": np.random.default_rng(seed).uniform(-1, 1, (1, 3, 32, 32))
              .astype(np.float32)} for seed in (0, 1)]
    a, b = (every_value(work / "filled.onnx", f) for f in feeds)
    largest = max(float(np.max(np.abs(v))) for v in a.values())
    difference = float(np.max(np.abs(a["output"] - b["output"])) / np.max(np.abs(a["output"])))
    print(f"{BLOCKS} residual blocks with BatchNormalization: largest |value| {largest:.3g}, "
          f"outputs of two inputs {difference:.3g} apart")
    failures = []
    if not largest < LARGEST_ACTIVATION:
        failures.append(f"an activation reaches {largest:.3g}; the fill must keep them under "
                        f"{LARGEST_ACTIVATION:g}")
    if not difference > MIN_INPUT_SENSITIVITY:
        failures.append(f"two inputs give outputs {difference:.3g} apart; the fill must keep them "
                        f"over {MIN_INPUT_SENSITIVITY:g}")
    for f in failures:
        print(f"FAIL: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
