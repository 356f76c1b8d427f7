# The engine's latency against ONNX Runtime's Python session on the same model, weights, input and
# thread count, in one process: fusor.InferenceSession.run (Python), Engine::Run looped in C++
# (inputs and outputs copied through a context's arena), an IO binding looped in C++ (zero copies
# per run), and onnxruntime.InferenceSession.run with intra_op_num_threads = THREADS and
# sequential execution. Models are the bundled ones filled with weights (tools/fill_weights.py;
# ctest's filled_models fixture leaves them in build/filled_models). Run with the build's package:
#   PYTHONPATH=build/python /usr/bin/python3 bench/engine_vs_onnxruntime.py \
#       [--models DIR] [--threads 1,2] [--rounds 5] [MODEL ...]
# Each side's time is its best round (ms per run); rounds alternate the sides so drift in the
# host's speed touches all alike. The plan is the rules plan unless --db names a tuning database.
import argparse
import os

import numpy as np
import onnxruntime

import fusor
from python_run_overhead import per_run  # bench/ is on the path: it holds this script.


def feed_for(session):
    rng = np.random.default_rng(0)
    return {i.name: rng.uniform(-1, 1, i.shape).astype(i.dtype) for i in session.get_inputs()}


def bench(path, threads, rounds, db):
    ours = fusor.InferenceSession(path, threads=threads, db=db)
    feed = feed_for(ours)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    ort = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    # Enough runs for ~0.3 s a side per round.
    once = per_run(lambda: ort.run(None, feed), 3)
    iterations = max(3, int(0.3 / max(once, 1e-6)))
    sides = {
        "session.run": lambda: per_run(lambda: ours.run(None, feed), iterations),
        "Engine::Run": lambda: ours._engine._time_engine_run(feed, iterations),
        "IoBinding::Run": lambda: ours._engine._time_bound_run(feed, iterations),
        "onnxruntime": lambda: per_run(lambda: ort.run(None, feed), iterations),
    }
    best = {name: float("inf") for name in sides}
    for _ in range(rounds):
        for name, side in sides.items():
            best[name] = min(best[name], side())
    parity = np.abs(ours.run(None, feed)[0] - ort.run(None, feed)[0]).max()
    return best, parity, ours.plan_source


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*", default=["squeezenet1_1", "mobilenet_v2", "resnet18"])
    parser.add_argument("--models-dir", default="build/filled_models")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--db", default=None)
    args = parser.parse_args()
    print(f"onnxruntime {onnxruntime.__version__}; ms per run, best of {args.rounds} rounds")
    print(f"{'model':<16}{'threads':>8}{'session.run':>13}{'Engine::Run':>13}"
          f"{'IoBinding':>11}{'onnxruntime':>13}{'ort/binding':>13}{'max |diff|':>12}")
    for model in args.models:
        path = os.path.join(args.models_dir, model + ".onnx")
        for threads in (int(t) for t in args.threads.split(",")):
            best, parity, plan = bench(path, threads, args.rounds, args.db)
            ms = {k: v * 1e3 for k, v in best.items()}
            print(f"{model:<16}{threads:>8}{ms['session.run']:>13.3f}{ms['Engine::Run']:>13.3f}"
                  f"{ms['IoBinding::Run']:>11.3f}{ms['onnxruntime']:>13.3f}"
                  f"{ms['onnxruntime'] / ms['IoBinding::Run']:>13.2f}{parity:>12.2e}")
            print(f"  plan: {plan}")


if __name__ == "__main__":
    main()
