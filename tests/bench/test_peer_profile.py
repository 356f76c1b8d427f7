# bench/peers/profile.py end to end on a small model built here, whose ONNX Runtime nodes are known:
# a MatMul + Add (ORT: one Gemm named after the MatMul, between two Reshapes it adds), an erf
# Gelu written out in five nodes (ORT: one Gelu writing the last node's tensor), LayerNormalization
# and Softmax (kept as they are) and a Conv + Relu (ORT: one Conv writing Relu's tensor, on a
# channel-blocked copy where the CPU has the blocked kernels). Checks that each ORT node is
# credited to the ONNX nodes it computes, that its row holds the Fusor groups computing them (one
# row for the five groups of the unfused Gelu), and that the installed ONNX Runtime is the pinned
# one. Run by ctest (bench/CMakeLists.txt) with
# FUSOR_GROUP_PROFILE naming build/bench/group_profile.
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "peers"))
import ort_session  # noqa: E402

GELU = ["gelu_half", "gelu_mul", "gelu_add", "gelu_erf", "gelu_div"]
# The ONNX nodes each ORT node computes, by ORT's op type, the one it writes the tensor of first;
# ORT adds one Reshape of its own and reorders Relu's output only where it blocks the Conv.
EXPECTED = {"Gemm": [["mm"]], "Gelu": [GELU], "LayerNormalization": [["ln"]],
            "Softmax": [["softmax"]], "Conv": [["relu", "conv"]], "ReorderOutput": [["relu"]],
            "Reshape": [["bias"], []]}


def small_model(path):
    rng = np.random.default_rng(0)

    def weight(name, shape):
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.2, name)

    def scalar(name, value):
        return numpy_helper.from_array(np.array(value, np.float32), name)

    node = helper.make_node
    nodes = [
        node("MatMul", ["x", "w"], ["mm_out"], name="mm"),
        node("Add", ["mm_out", "b"], ["bias_out"], name="bias"),
        node("Div", ["bias_out", "sqrt2"], ["div_out"], name="gelu_div"),
        node("Erf", ["div_out"], ["erf_out"], name="gelu_erf"),
        node("Add", ["erf_out", "one"], ["add1_out"], name="gelu_add"),
        node("Mul", ["bias_out", "add1_out"], ["mul_out"], name="gelu_mul"),
        node("Mul", ["mul_out", "half"], ["gelu_out"], name="gelu_half"),
        node("LayerNormalization", ["gelu_out", "ln_scale", "ln_bias"], ["ln_out"], name="ln"),
        node("Softmax", ["ln_out"], ["probs"], name="softmax", axis=-1),
        node("Conv", ["y", "cw", "cb"], ["conv_out"], name="conv", pads=[1, 1, 1, 1]),
        node("Relu", ["conv_out"], ["features"], name="relu"),
    ]
    weights = [weight("w", [16, 32]), weight("b", [32]), scalar("sqrt2", 2**0.5),
               scalar("one", 1.0), scalar("half", 0.5), weight("ln_scale", [32]),
               weight("ln_bias", [32]), weight("cw", [4, 3, 3, 3]), weight("cb", [4])]
    graph = helper.make_graph(
        nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16]),
                         helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 8, 32]),
         helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, 4, 8, 8])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def profile(tmp_path, *flags):
    out = tmp_path / "report.json"
    command = [sys.executable, str(ROOT / "bench" / "peers" / "profile.py"), "--runs", "3",
               "--group-profile", os.environ["FUSOR_GROUP_PROFILE"], "--json", str(out),
               *flags, str(small_model(tmp_path / "small.onnx"))]
    text = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.read_text()), text


def ort_nodes(report):
    return [(n, row) for row in report["rows"] for n in row["ort_nodes"]]


def test_the_installed_onnxruntime_is_the_pinned_one():
    ort_session.check_version()
    check = [str(ROOT / "deploy" / "install-peers.sh"), "--check"]
    assert subprocess.run(check, env={**os.environ, "FUSOR_PEER_PYTHON": sys.executable}).returncode == 0


def test_each_ort_node_is_credited_to_the_onnx_nodes_it_computes(tmp_path):
    report, _ = profile(tmp_path, "--unfused")
    credited = {}
    for n, _ in ort_nodes(report):
        credited.setdefault(n["op"], []).append(n["onnx_nodes"])
    assert credited.keys() - {"ReorderOutput"} == EXPECTED.keys() - {"ReorderOutput"}
    for op, onnx_nodes in credited.items():
        assert sorted(onnx_nodes) == sorted(EXPECTED[op]), op
    gemm = next(n for n, _ in ort_nodes(report) if n["op"] == "Gemm")
    assert gemm["name"].startswith("mm/"), "credited by the name ORT gives a fusion"
    gelu_row = next(row for n, row in ort_nodes(report) if n["op"] == "Gelu")
    assert sorted(gelu_row["nodes"]) == sorted(GELU) and len(gelu_row["groups"]) == len(GELU)


def test_every_ort_node_is_in_the_row_of_the_groups_holding_its_onnx_nodes(tmp_path):
    report, _ = profile(tmp_path)  # The greedy plan: groups of several nodes.
    assert sorted(sum((row["groups"] for row in report["rows"]), [])) == list(
        range(report["groups"]))
    for n, row in ort_nodes(report):
        assert set(n["onnx_nodes"]) <= set(row["nodes"])
        assert row["groups"] or not n["onnx_nodes"]
    assert sorted(sum((row["nodes"] for row in report["rows"]), [])) == sorted(
        ["mm", "bias", *GELU, "ln", "softmax", "conv", "relu"])


def test_the_table_names_each_groups_ort_nodes(tmp_path):
    _, text = profile(tmp_path, "--unfused", "--names")
    assert "against ONNX Runtime " + ort_session.pinned_version() in text
    assert "ORT Gemm 'mm/MatMulAddFusion' -> mm" in text
    softmax_row = next(line for line in text.splitlines() if "single [Softmax]" in line)
    assert " Softmax " in softmax_row
    assert "session run" in text and "plan run" in text
