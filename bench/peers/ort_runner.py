"""The ONNX Runtime side of the peer bench (bench/peer_bench.cc drives it; bench/peers/README.md).

Usage: /usr/bin/python3 ort_runner.py MODEL.onnx INPUT_DIR OUTPUT_DIR THREADS

Loads MODEL as ort_session.py sets ONNX Runtime up (the pinned version, every graph
optimisation, THREADS intra-op threads), reads each graph input from INPUT_DIR/<input name>.npy,
runs once and writes each output to OUTPUT_DIR/output_<k>.npy (graph output order), prints
"ready VERSION", then answers each "run N" line on stdin with one line of N wall times in
milliseconds, each timing session.run alone, and exits on "quit" or end of input."""
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import ort_session  # noqa: E402


def serve(session, feeds):
    for line in sys.stdin:
        words = line.split()
        if len(words) != 2 or words[0] != "run":
            return
        times = []
        for _ in range(int(words[1])):
            t0 = time.perf_counter_ns()
            session.run(None, feeds)
            times.append((time.perf_counter_ns() - t0) / 1e6)
        print(" ".join(f"{t:.6f}" for t in times), flush=True)


def main():
    model, input_dir, output_dir, threads = sys.argv[1:5]
    session = ort_session.open_session(model, int(threads))
    feeds = ort_session.read_feeds(session, input_dir)
    for k, value in enumerate(session.run(None, feeds)):
        np.save(pathlib.Path(output_dir) / f"output_{k}.npy", value)
    print(f"ready {ort_session.onnxruntime.__version__}", flush=True)
    serve(session, feeds)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # The bench reads stderr; a traceback would bury the one line.
        print(f"ort_runner: {e}", file=sys.stderr)
        sys.exit(1)
