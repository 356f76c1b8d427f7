# Tunes a model's fusion plan with the fusor Python package, runs it, compares its outputs and
# time with ONNX Runtime's, and prints the slowest groups' predicted times; --plot draws every
# group's (matplotlib, optional) and writes the data it draws beside the chart as CSV.
#   python3 examples/python_tune_and_run.py MODEL.onnx [--db tuning.db] [--plot groups.png]
# MODEL must carry its weights (tools/fill_weights.py fills a bundled model's). tests/python
# (test_example.py) runs this script on the filled squeezenet1_1.
import argparse
import os
import time

import numpy as np

import fusor


def mean_run_ms(session, feed, runs=20):
    session.run(None, feed)
    start = time.perf_counter()
    for _ in range(runs):
        session.run(None, feed)
    return (time.perf_counter() - start) / runs * 1e3


def write_group_times(rows, path):
    """The plotted data, one line per group: group, kind, nodes, predicted us, measured us."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("group,kind,nodes,predicted_us,measured_us\n")
        for r in rows:
            measured = "" if r["measured_ns"] is None else f"{r['measured_ns'] / 1e3:.3f}"
            f.write(f"{r['group']},{r['kind']},{r['nodes']},{r['predicted_ns'] / 1e3:.3f},"
                    f"{measured}\n")


def plot_groups(rows, title, png_path):
    """A bar chart of each group's predicted time in png_path, its data in png_path's .csv."""
    csv_path = os.path.splitext(png_path)[0] + ".csv"
    write_group_times(rows, csv_path)
    print(f"group times written to {csv_path}")
    try:
        import matplotlib  # Optional: only the chart needs it.
    except ImportError:
        print(f"matplotlib is not installed: no chart at {png_path} (pip install matplotlib); "
              f"the data is in {csv_path}")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.figure(figsize=(10, 3))
    plt.bar([r["group"] for r in rows], [r["predicted_ns"] / 1e3 for r in rows])
    plt.xlabel("group")
    plt.ylabel("predicted us")
    plt.title(f"{title}: {len(rows)} groups")
    plt.tight_layout()
    plt.savefig(png_path)
    print(f"plot written to {png_path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model")
    parser.add_argument("--db", default=None, help="tuning database (default: the per-user one)")
    parser.add_argument("--budget", type=int, default=0, help="measurements (0: the default)")
    parser.add_argument("--no-calibrate", action="store_true",
                        help="tune with the uncalibrated cost model rather than calibrate first")
    parser.add_argument("--plot", default=None,
                        help="write a bar chart of group times (PNG, needs matplotlib) and its "
                             "data beside it (.csv)")
    args = parser.parse_args()

    result = fusor.tune(args.model, db=args.db, budget=args.budget,
                        calibrate=not args.no_calibrate)
    print(f"tuned: {len(result.plan.groups)} groups, predicted {result.predicted_ns / 1e6:.3f} ms "
          f"vs {result.unfused_predicted_ns / 1e6:.3f} ms unfused"
          f"{' (cached)' if result.cache_hit else ''}")

    session = fusor.InferenceSession(args.model, plan=result.plan)
    rng = np.random.default_rng(0)
    feed = {i.name: rng.uniform(-1, 1, i.shape).astype(i.dtype) for i in session.get_inputs()}
    outputs = session.run(None, feed)
    print(f"fusor:        {mean_run_ms(session, feed):.3f} ms per run")

    try:
        import onnxruntime
    except ImportError:
        print("onnxruntime is not installed: skipping the comparison (pip install onnxruntime)")
    else:
        reference = onnxruntime.InferenceSession(args.model, providers=["CPUExecutionProvider"])
        print(f"onnxruntime:  {mean_run_ms(reference, feed):.3f} ms per run")
        for meta, ours, theirs in zip(session.get_outputs(), outputs, reference.run(None, feed)):
            scale = float(np.max(np.abs(theirs))) or 1.0
            print(f"output '{meta.name}': max |fusor - onnxruntime| / max |onnxruntime| = "
                  f"{float(np.max(np.abs(ours - theirs))) / scale:.2e}")

    rows = result.plan.explain()
    slowest = sorted(rows, key=lambda r: r["predicted_ns"], reverse=True)[:5]
    print("slowest groups (predicted):")
    for r in slowest:
        print(f"  group {r['group']:3d} {r['kind']:9s} {r['nodes']:3d} nodes "
              f"{r['predicted_ns'] / 1e3:9.1f} us")
    if args.plot:
        plot_groups(rows, args.model, args.plot)


if __name__ == "__main__":
    main()
