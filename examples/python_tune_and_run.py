# Tunes a model's fusion plan with the fusor Python package, runs it, compares its outputs and
# time with ONNX Runtime's, and prints (or, with --plot, draws) each group's predicted time.
#   python3 examples/python_tune_and_run.py MODEL.onnx [--db tuning.db] [--plot groups.png]
# MODEL must carry its weights (tools/fill_weights.py fills a bundled model's). tests/python runs
# this script on the filled squeezenet1_1.
import argparse
import time

import numpy as np

import fusor


def mean_run_ms(session, feed, runs=20):
    session.run(None, feed)
    start = time.perf_counter()
    for _ in range(runs):
        session.run(None, feed)
    return (time.perf_counter() - start) / runs * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model")
    parser.add_argument("--db", default=None, help="tuning database (default: the per-user one)")
    parser.add_argument("--budget", type=int, default=0, help="measurements (0: the default)")
    parser.add_argument("--no-calibrate", action="store_true",
                        help="tune with the uncalibrated cost model rather than calibrate first")
    parser.add_argument("--plot", default=None, help="write a bar chart of group times (PNG)")
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
        import matplotlib  # Optional: only --plot needs it.
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        plt.figure(figsize=(10, 3))
        plt.bar([r["group"] for r in rows], [r["predicted_ns"] / 1e3 for r in rows])
        plt.xlabel("group")
        plt.ylabel("predicted us")
        plt.title(f"{args.model}: {len(rows)} groups")
        plt.tight_layout()
        plt.savefig(args.plot)
        print(f"plot written to {args.plot}")


if __name__ == "__main__":
    main()
