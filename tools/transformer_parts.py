#!/usr/bin/python3
"""Writes the two halves of a transformer layer as small ONNX models for bench/peers.

`attn_S.onnx` is the attention core as the shared encoders export it (already-scaled Q, K^T and V
as graph inputs, MatMul -> Softmax(axis -1) -> MatMul); `dense_S.onnx` is a layer's dense half
(the QKV projection, the feed-forward pair with an erf GELU between them and the residual Add),
with seeded random weights. Timing each with `build/bench/peer_bench` says which half a
transformer's gap to ONNX Runtime lies in (docs/benchmarks.md, "Where the transformers spend
their time").

    /usr/bin/python3 tools/transformer_parts.py OUT_DIR [--seq 128 50] [--heads 12] [--head-dim 64]
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _value(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _save(path, nodes, inputs, outputs, initializers):
    graph = helper.make_graph(nodes, os.path.basename(path)[:-5], inputs, outputs, initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def attention_core(path, seq, heads, head_dim):
    nodes = [
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "v"], ["out"]),
    ]
    inputs = [_value("q", [1, heads, seq, head_dim]), _value("kt", [1, heads, head_dim, seq]),
              _value("v", [1, heads, seq, head_dim])]
    _save(path, nodes, inputs, [_value("out", [1, heads, seq, head_dim])], [])


def dense_half(path, seq, width, rng):
    def weight(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.02).astype(np.float32), name)

    def scalar(name, value):
        return numpy_helper.from_array(np.array(value, np.float32), name)

    node = helper.make_node
    nodes = [
        node("MatMul", ["x", "w_qkv"], ["qkv_mm"]), node("Add", ["b_qkv", "qkv_mm"], ["qkv"]),
        node("MatMul", ["x", "w_up"], ["up_mm"]), node("Add", ["b_up", "up_mm"], ["up"]),
        node("Div", ["up", "sqrt2"], ["g0"]), node("Erf", ["g0"], ["g1"]),
        node("Add", ["g1", "one"], ["g2"]), node("Mul", ["up", "g2"], ["g3"]),
        node("Mul", ["g3", "half"], ["gelu"]),
        node("MatMul", ["gelu", "w_down"], ["down_mm"]), node("Add", ["b_down", "down_mm"], ["down"]),
        node("Add", ["down", "x"], ["out"]),
    ]
    initializers = [
        weight("w_qkv", width, 3 * width), weight("b_qkv", 3 * width),
        weight("w_up", width, 4 * width), weight("b_up", 4 * width),
        weight("w_down", 4 * width, width), weight("b_down", width),
        scalar("sqrt2", np.sqrt(2.0)), scalar("one", 1.0), scalar("half", 0.5),
    ]
    outputs = [_value("qkv", [1, seq, 3 * width]), _value("out", [1, seq, width])]
    _save(path, nodes, [_value("x", [1, seq, width])], outputs, initializers)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seq", type=int, nargs="+", default=[128, 50])
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    for seq in args.seq:
        attention_core(os.path.join(args.out_dir, f"attn_{seq}.onnx"), seq, args.heads,
                       args.head_dim)
        dense_half(os.path.join(args.out_dir, f"dense_{seq}.onnx"), seq,
                   args.heads * args.head_dim, rng)
        print(f"wrote attn_{seq}.onnx and dense_{seq}.onnx")


if __name__ == "__main__":
    main()
