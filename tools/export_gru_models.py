"""GRU models and test data.

Usage: /usr/bin/python3 tools/export_gru_models.py

Writes, from the repository root:
  models/gru_tagger.onnx    a tagger (Embedding 10000x256, torch.nn.GRU(256, 256, 2 layers,
                            batch_first, bidirectional), Linear 512 -> 32) exported by torch at
                            opset 17 over ids [1, 128], weights stripped as for lstm_tagger.
  tests/runtime/data/gru/<case>/model.onnx, <input name>.npy, output_<k>.npy
                            small GRU models with their weights, their inputs, and the expected
                            value of each graph output (in graph output order):
    torch_tagger            the same architecture, small (Embedding 50x8, GRU(8, 6, 2 layers),
                            Linear 12 -> 5), exported by torch (linear_before_reset=1); expected
                            values from torch itself.
    lbr0_bidirectional      an ONNX GRU built with onnx.helper: linear_before_reset=0,
                            bidirectional, B, initial_h, Y and Y_h read.
    lbr0_reverse_short_lens linear_before_reset=0, reverse, sequence_lens [5, 2, 4] of 5 steps.
    lbr1_forward_state_only linear_before_reset=1, forward, no B, only Y_h read.
                            Expected values of the onnx.helper cases from ONNX Runtime
                            (bench/peers: ./deploy/install-peers.sh), which torch cannot compute
                            for linear_before_reset=0.
"""
import os, subprocess, sys, tempfile
import numpy as np, onnx, torch
from onnx import helper, numpy_helper, TensorProto
from onnx.external_data_helper import convert_model_to_external_data

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "runtime", "data", "gru")
RUNNER = os.path.join(ROOT, "bench", "peers", "ort_runner.py")


class GruTagger(torch.nn.Module):
    def __init__(s, vocab, dim, hidden, tags):
        super().__init__()
        s.emb = torch.nn.Embedding(vocab, dim)
        s.gru = torch.nn.GRU(dim, hidden, 2, batch_first=True, bidirectional=True)
        s.out = torch.nn.Linear(2 * hidden, tags)

    def forward(s, ids):
        y, h = s.gru(s.emb(ids))
        return s.out(y), h


def save_npy(path, a):
    np.save(path, np.ascontiguousarray(a))


def export_tagger_stripped():
    torch.manual_seed(0)
    m = GruTagger(10000, 256, 256, 32).eval()
    ids = torch.randint(0, 8000, (1, 128))
    path = os.path.join(ROOT, "models", "gru_tagger.onnx")
    torch.onnx.export(m, (ids,), path, opset_version=17, input_names=["input"],
                      output_names=["output", "state"], do_constant_folding=True)
    model = onnx.load(path)
    convert_model_to_external_data(model, all_tensors_to_one_file=True,
                                   location="gru_tagger.weights", size_threshold=1024)
    onnx.save(model, path)
    os.remove(os.path.join(ROOT, "models", "gru_tagger.weights"))
    print("gru_tagger", len(model.graph.node), "nodes", os.path.getsize(path), "bytes")


def export_torch_case():
    torch.manual_seed(1)
    m = GruTagger(50, 8, 6, 5).eval()
    ids = torch.randint(0, 50, (2, 7))
    d = os.path.join(DATA, "torch_tagger")
    os.makedirs(d, exist_ok=True)
    torch.onnx.export(m, (ids,), os.path.join(d, "model.onnx"), opset_version=17,
                      input_names=["ids"], output_names=["tags", "state"],
                      do_constant_folding=True)
    with torch.no_grad():
        tags, state = m(ids)
    save_npy(os.path.join(d, "ids.npy"), ids.numpy().astype(np.int64))
    save_npy(os.path.join(d, "output_0.npy"), tags.numpy())
    save_npy(os.path.join(d, "output_1.npy"), state.numpy())
    return d


def gru_case(name, direction, lbr, bias, initial_h, lens, outputs, seed):
    rng = np.random.default_rng(seed)
    seq, batch, inp, hid = 5, 3, 4, 6
    dirs = 2 if direction == "bidirectional" else 1
    init = [numpy_helper.from_array(rng.uniform(-0.6, 0.6, (dirs, 3 * hid, inp)).astype(np.float32), "W"),
            numpy_helper.from_array(rng.uniform(-0.6, 0.6, (dirs, 3 * hid, hid)).astype(np.float32), "R")]
    ins = ["X", "W", "R", "", "", ""]
    graph_inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [seq, batch, inp])]
    values = {"X": rng.standard_normal((seq, batch, inp)).astype(np.float32)}
    if bias:
        init.append(numpy_helper.from_array(rng.uniform(-0.5, 0.5, (dirs, 6 * hid)).astype(np.float32), "B"))
        ins[3] = "B"
    if lens is not None:
        init.append(numpy_helper.from_array(np.array(lens, dtype=np.int32), "sequence_lens"))
        ins[4] = "sequence_lens"
    if initial_h:
        graph_inputs.append(helper.make_tensor_value_info("initial_h", TensorProto.FLOAT, [dirs, batch, hid]))
        values["initial_h"] = rng.standard_normal((dirs, batch, hid)).astype(np.float32)
        ins[5] = "initial_h"
    while ins and ins[-1] == "":
        ins.pop()
    shapes = {"Y": [seq, dirs, batch, hid], "Y_h": [dirs, batch, hid]}
    node = helper.make_node("GRU", ins, ["Y" if "Y" in outputs else "", "Y_h"], name="gru",
                            hidden_size=hid, direction=direction, linear_before_reset=lbr)
    graph = helper.make_graph([node], name, graph_inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, shapes[o]) for o in outputs],
                              init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    d = os.path.join(DATA, name)
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for k, v in values.items():
        save_npy(os.path.join(d, k + ".npy"), v)
    return d


def run_ort(case_dir, out_dir):
    subprocess.run([sys.executable, RUNNER, os.path.join(case_dir, "model.onnx"), case_dir, out_dir,
                    "1"],
                   input="quit\n", text=True, check=True, stdout=subprocess.DEVNULL)


def main():
    export_tagger_stripped()
    torch_dir = export_torch_case()
    with tempfile.TemporaryDirectory() as tmp:
        run_ort(torch_dir, tmp)  # A cross-check of torch's export: ORT agrees with torch.
        for k in range(2):
            a = np.load(os.path.join(tmp, f"output_{k}.npy"))
            b = np.load(os.path.join(torch_dir, f"output_{k}.npy"))
            print(f"torch_tagger output_{k}: max |ORT - torch| = {np.abs(a - b).max():.3g}")
    cases = [gru_case("lbr0_bidirectional", "bidirectional", 0, True, True, None, ["Y", "Y_h"], 2),
             gru_case("lbr0_reverse_short_lens", "reverse", 0, True, False, [5, 2, 4], ["Y", "Y_h"], 3),
             gru_case("lbr1_forward_state_only", "forward", 1, False, False, None, ["Y_h"], 4)]
    for d in cases:
        run_ort(d, d)
        print(os.path.basename(d), "expected values from ONNX Runtime")


if __name__ == "__main__":
    main()
