# What fusor.InferenceSession.run adds over the C++ engine's Engine::Run, measured side by side in
# one process on a small model (MatMul 1x64 @ 64x64, Add, Relu): Python's run (feed conversion,
# GIL release, NumPy outputs) against Engine::Run looped in C++ on inputs converted once, with
# ONNX Runtime's run beside them when it is installed. Run with the build's package:
#   PYTHONPATH=build/python /usr/bin/python3 bench/python_run_overhead.py [ITERATIONS [ROUNDS]]
# Each side's time is its best round: on a shared host the best is the one least disturbed.
import os
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import fusor


def small_model(path):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32) / 8, "w")
    b = numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Add", ["h", "b"], ["z"]),
             helper.make_node("Relu", ["z"], ["y"])]
    graph = helper.make_graph(nodes, "small_mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
                              [w, b])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def per_run(fn, iterations):
    fn()
    start = time.perf_counter()
    for _ in range(iterations):
        fn()
    return (time.perf_counter() - start) / iterations


def main():
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "small_mlp.onnx")
        small_model(path)
        session = fusor.InferenceSession(path, threads=1)
        feed = {"x": np.random.default_rng(1).standard_normal((1, 64)).astype(np.float32)}
        rows = []
        for _ in range(rounds):  # Alternated, so drift in the host's speed touches both alike.
            engine = session._engine._time_engine_run(feed, iterations)
            python = per_run(lambda: session.run(None, feed), iterations)
            rows.append((engine, python))
        engine = min(r[0] for r in rows)
        python = min(r[1] for r in rows)
        print(f"model            small_mlp (MatMul 1x64x64, Add, Relu), {rounds} rounds of "
              f"{iterations} runs, best round")
        print(f"Engine::Run      {engine * 1e6:8.2f} us")
        print(f"session.run      {python * 1e6:8.2f} us   (+{(python - engine) * 1e6:.2f} us, "
              f"{python / engine:.2f}x)")
        try:
            import onnxruntime
        except ImportError:
            return
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        ort = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        theirs = min(per_run(lambda: ort.run(None, feed), iterations) for _ in range(rounds))
        print(f"onnxruntime.run  {theirs * 1e6:8.2f} us   (onnxruntime {onnxruntime.__version__})")


if __name__ == "__main__":
    main()
