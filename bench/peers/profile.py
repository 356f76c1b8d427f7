"""Where each runtime spends its time on one model: every Fusor group's time beside the time of
the ONNX Runtime nodes that compute the same ONNX nodes (bench/peers/README.md, "Per-node
profile").

Usage: /usr/bin/python3 bench/peers/profile.py [--runs N] [--threads T] [--unfused]
           [--json OUT] [--names] [--group-profile PATH] MODEL.onnx[=PLAN.json][@dim=V,...]

MODEL carries its weights (bench/peers/prepare.sh fills and tunes; profile.sh does both). Fusor's
side is build/bench/group_profile (the plan's groups, each timed inside N profiled runs of the
plan, T OpenMP threads); it also writes the seeded inputs ONNX Runtime then reads, so both compute
the same thing. ONNX Runtime's side is ort_session.py's session (the pinned version, every graph
optimisation, T intra-op threads, sequential) with its profiler on: ~200 ms of runs, then N runs,
each node's kernel time read from the profile.

Each ORT node is credited to the ONNX node whose tensor it writes (a fused node writes its last
node's output; "_nchwc" marks the channel-blocked copy of a tensor) and the ONNX nodes between its
inputs and that one (the rest of the fusion), else to the ONNX node its name is or starts with
(ORT names some fusions after their first node: ".../MatMul/MatMulAddFusion"); the Fusor groups
holding those nodes get its time. Nodes ORT adds (reshapes around a Gemm, layout reorders of a
graph input) and nodes on ONNX nodes Fusor's import removed are credited to no group, and have a
row of their own.

The table has one row per Fusor group, or per set of groups when one ORT node computes parts of
several (ORT's LayerNormalization over Fusor's groups of the written-out mean and variance): the
median over runs of the groups' time and of their ORT nodes' time, sorted by Fusor - ORT (where
Fusor loses most first); then the totals: the median session run (ORT's model_run) against the
median plan run, each split into the time in nodes (groups) and outside them. On a loaded host
read the per-group figures for where time goes, not as a comparison: peer_bench times whole runs
in alternating rounds."""
import argparse
import json
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import ort_session  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
WARM_MS = 200
NCHWC_SUFFIX = "_nchwc"
NO_GROUP = "(no Fusor group)"
# The most ONNX nodes one ORT node is taken to compute (ORT's largest fusions, attention, have ~20).
MAX_COVERED = 64


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("spec", metavar="MODEL.onnx[=PLAN.json][@dim=V,...]")
    p.add_argument("--runs", type=int, default=20, help="profiled runs per runtime")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--unfused", action="store_true", help="Fusor runs every op alone")
    p.add_argument("--json", type=pathlib.Path, help="also write the table as JSON here")
    p.add_argument("--names", action="store_true",
                   help="list each row's ONNX and ORT node names under it")
    p.add_argument("--group-profile", type=pathlib.Path,
                   default=ROOT / "build" / "bench" / "group_profile")
    return p.parse_args()


def model_path(spec):
    return re.split("[=@]", spec, maxsplit=1)[0]


def onnx_node_names(graph):
    """Each ONNX node's name as Fusor's import gives it (OP_INDEX when unnamed), in graph order."""
    return [n.name or f"{n.op_type}_{k}" for k, n in enumerate(graph.node)]


def original_name(tensor):
    """The ONNX tensor an ORT tensor holds: ORT's channel-blocked copies end in "_nchwc"."""
    return tensor[:-len(NCHWC_SUFFIX)] if tensor.endswith(NCHWC_SUFFIX) else tensor


class Credit:
    """Which ONNX nodes each ORT node computes, from the original graph and ORT's optimised one."""

    def __init__(self, original, optimized):
        names = onnx_node_names(original)
        self.nodes = set(names)
        self.inputs = {name: [t for t in n.input if t] for name, n in zip(names, original.node)}
        self.producer = {t: name for name, n in zip(names, original.node) for t in n.output if t}
        self.graph_inputs = {i.name for i in original.input} - {i.name for i in original.initializer}
        self.ort = {n.name: n for n in optimized.node}

    def onnx_nodes(self, ort_name):
        """The ONNX nodes the ORT node computes, the one it is credited to first; [] for none."""
        node = self.ort.get(ort_name)
        last = next((self.producer[original_name(t)] for t in (node.output if node else [])
                     if original_name(t) in self.producer), None)
        last = last or (ort_name if ort_name in self.nodes else self.by_prefix(ort_name))
        if last is None:
            return []
        return self.covered(node, last) if node else [last]

    def covered(self, node, last):
        """`last` and the ONNX nodes between the ORT node's inputs and it: what a fusion ending in
        `last` computes (ORT's channel-blocked Conv named after its Relu's output: both). Only `last` when the walk back leaves the ORT node's inputs behind (its
        inputs are tensors ORT made) or the node copies a tensor (a layout reorder)."""
        stop = {original_name(t) for t in node.input if t}
        if any(original_name(t) in stop for t in node.output):
            return [last]
        found, todo = [last], [last]
        while todo:
            for t in self.inputs[todo.pop()]:
                if t in stop or (t not in self.producer and t not in self.graph_inputs):
                    continue
                if t in self.graph_inputs or len(found) == MAX_COVERED:
                    return [last]
                if self.producer[t] not in found:
                    found.append(self.producer[t])
                    todo.append(self.producer[t])
        return found

    def by_prefix(self, ort_name):
        """The ONNX node, or the producer of the tensor, with the longest name that `ort_name`
        starts with, followed by '/' or '_'."""
        for k in range(len(ort_name) - 1, 0, -1):
            if ort_name[k] in "/_":
                head = ort_name[:k]
                if head in self.nodes:
                    return head
                if head in self.producer:
                    return self.producer[head]
        return None


def run_fusor(args, work):
    command = [str(args.group_profile), "--threads", str(args.threads), "--runs", str(args.runs),
               "--dir", str(work), args.spec] + (["--unfused"] if args.unfused else [])
    subprocess.run(command, check=True)
    return json.loads((work / "fusor.json").read_text())


def optimized_graph(model, threads, work):
    """ORT's graph after its optimisations, as the profiled session runs it."""
    path = work / "ort_optimized.onnx"
    ort_session.open_session(model, threads, optimized_model=path)
    return onnx.load(str(path), load_external_data=False).graph


def run_ort(model, threads, runs, work):
    """The profile's events and the outputs of the first run."""
    session = ort_session.open_session(model, threads, profile_prefix=work / "ort_profile")
    feeds = ort_session.read_feeds(session, work / "in")
    outputs = session.run(None, feeds)
    start = time.perf_counter()
    while (time.perf_counter() - start) * 1e3 < WARM_MS:
        session.run(None, feeds)
    for _ in range(runs):
        session.run(None, feeds)
    return json.loads(pathlib.Path(session.end_profiling()).read_text()), outputs


def ort_runs(events, runs):
    """The last `runs` model runs: each (session run ms, [(node name, op, ms)])."""
    model_runs = sorted((e for e in events if e.get("name") == "model_run"),
                        key=lambda e: e["ts"])[-runs:]
    kernels = [e for e in events
               if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    result = []
    for r in model_runs:
        nodes = [(e["name"][:-len("_kernel_time")], e["args"].get("op_name", "?"), e["dur"] / 1e3)
                 for e in kernels if r["ts"] <= e["ts"] <= r["ts"] + r["dur"]]
        result.append((r["dur"] / 1e3, nodes))
    return result


def max_relative_difference(work, ort_outputs):
    worst = 0.0
    for k, theirs in enumerate(ort_outputs):
        ours = np.load(work / "fusor_out" / f"output_{k}.npy")
        theirs = np.asarray(theirs, dtype=np.float64)
        scale = max(float(np.max(np.abs(theirs))), 1e-30) if theirs.size else 1.0
        worst = max(worst, float(np.max(np.abs(ours - theirs), initial=0.0)) / scale)
    return worst


class Components:
    """Union-find over Fusor groups: groups one ORT node computes parts of share a row."""

    def __init__(self, n):
        self.parent = list(range(n))

    def find(self, i):
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def join(self, groups):
        for g in groups[1:]:
            self.parent[self.find(g)] = self.find(groups[0])


def build_rows(fusor, runs, credit):
    """One row per set of Fusor groups that ORT nodes tie together (most rows: one group), and
    one for ORT nodes in no group; per-run sums on both sides, then their medians."""
    groups = fusor["groups"]
    group_of = {n["name"]: i for i, g in enumerate(groups) for n in g["nodes"]}
    credited = {}  # ORT node name -> (op, ONNX nodes, Fusor groups)
    components = Components(len(groups))
    for _, nodes in runs:
        for name, op, _ in nodes:
            if name not in credited:
                onnx_nodes = credit.onnx_nodes(name)
                in_groups = sorted({group_of[n] for n in onnx_nodes if n in group_of})
                credited[name] = (op, onnx_nodes, in_groups)
                components.join(in_groups)
    rows = {}
    for i in range(len(groups)):
        rows.setdefault(components.find(i), {"groups": [], "ort_nodes": []})["groups"].append(i)
    no_group = {"groups": [], "ort_nodes": []}
    for name, (op, onnx_nodes, in_groups) in credited.items():
        row = rows[components.find(in_groups[0])] if in_groups else no_group
        row["ort_nodes"].append({"name": name, "op": op, "onnx_nodes": onnx_nodes})
    result = [summarize(row, groups, runs) for row in [*rows.values(), no_group]]
    result.sort(key=lambda row: row["fusor_ms"] - row["ort_ms"], reverse=True)
    return result


def lowering(indices, groups):
    """A group's lowering; of several, each one's label ("loop [Sub,Pow]")."""
    if len(indices) == 1:
        return groups[indices[0]]["lowering"]
    return " | ".join(groups[i]["lowering"].split(": ")[0] for i in indices) or NO_GROUP


def summarize(row, groups, runs):
    """The row's medians over runs, its ONNX nodes and its groups' lowerings."""
    mine = {n["name"] for n in row["ort_nodes"]}
    ort_ms = [sum(ms for name, _, ms in nodes if name in mine) for _, nodes in runs]
    fusor_ms = [sum(groups[i]["ms"][r] for i in row["groups"])
                for r in range(len(groups[0]["ms"]) if groups else 0)]
    return {**row, "nodes": [n["name"] for i in row["groups"] for n in groups[i]["nodes"]],
            "lowering": lowering(row["groups"], groups),
            "fusor_ms": statistics.median(fusor_ms) if row["groups"] else 0.0,
            "ort_ms": statistics.median(ort_ms) if runs else 0.0}


def totals(fusor, runs):
    group_sums = [sum(g["ms"][r] for g in fusor["groups"]) for r in range(len(fusor["run_ms"]))]
    node_sums = [sum(ms for _, _, ms in nodes) for _, nodes in runs]
    return {
        "ort_run_ms": statistics.median(run for run, _ in runs),
        "ort_nodes_ms": statistics.median(node_sums),
        "ort_outside_nodes_ms": statistics.median(run - s for (run, _), s in zip(runs, node_sums)),
        "fusor_run_ms": statistics.median(fusor["run_ms"]),
        "fusor_groups_ms": statistics.median(group_sums),
        "fusor_outside_groups_ms": statistics.median(
            run - s for run, s in zip(fusor["run_ms"], group_sums)),
    }


def ort_ops(row):
    """"Conv x2, ReorderOutput": the op types of the row's ORT nodes, in order of first run."""
    counts = {}
    for n in row["ort_nodes"]:
        counts[n["op"]] = counts.get(n["op"], 0) + 1
    return ", ".join(op + (f" x{c}" if c > 1 else "") for op, c in counts.items()) or "-"


def print_table(report, names):
    t = report["totals"]
    print(f"{report['model']}: Fusor {report['plan']} ({report['groups']} groups) against ONNX "
          f"Runtime {report['ort_version']}, {report['threads']} threads, median of "
          f"{report['runs']} profiled runs each")
    print(f"outputs: max |Fusor - ORT| / max |ORT| = {report['outputs_max_rel']:.3g}\n")
    print(f"{'Fusor ms':>9} {'ORT ms':>9} {'Fusor-ORT':>10} {'group':>5}  "
          f"{'ORT nodes':<34} Fusor's group")
    for row in report["rows"]:
        group = ",".join(map(str, row["groups"])) or "-"
        print(f"{row['fusor_ms']:9.3f} {row['ort_ms']:9.3f} {row['fusor_ms'] - row['ort_ms']:+10.3f} "
              f"{group:>5}  {ort_ops(row):<34} {row['lowering']}")
        if names:
            print(f"{'':37}ONNX nodes: {', '.join(row['nodes']) or '-'}")
            for n in row["ort_nodes"]:
                print(f"{'':37}ORT {n['op']} '{n['name']}' -> {', '.join(n['onnx_nodes']) or '-'}")
    print(f"\nONNX Runtime: session run {t['ort_run_ms']:.3f} ms: nodes {t['ort_nodes_ms']:.3f} ms, "
          f"outside nodes {t['ort_outside_nodes_ms']:.3f} ms")
    print(f"Fusor:        plan run    {t['fusor_run_ms']:.3f} ms: groups {t['fusor_groups_ms']:.3f} "
          f"ms, outside groups {t['fusor_outside_groups_ms']:.3f} ms")


def main():
    args = parse_args()
    model = model_path(args.spec)
    with tempfile.TemporaryDirectory(prefix="fusor-profile-") as tmp:
        work = pathlib.Path(tmp)
        fusor = run_fusor(args, work)
        credit = Credit(onnx.load(model, load_external_data=False).graph,
                        optimized_graph(model, args.threads, work))
        events, ort_outputs = run_ort(model, args.threads, args.runs, work)
        runs = ort_runs(events, args.runs)
        report = {
            "model": fusor["model"], "plan": fusor["plan"], "groups": len(fusor["groups"]),
            "ort_version": ort_session.onnxruntime.__version__, "threads": args.threads,
            "runs": args.runs, "outputs_max_rel": max_relative_difference(work, ort_outputs),
            "rows": build_rows(fusor, runs, credit), "totals": totals(fusor, runs),
        }
    print_table(report, args.names)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
