"""ONNX Runtime as the peer bench runs it (bench/peers/README.md): one place for its version and
session options, read by ort_runner.py (peer_bench's ONNX Runtime side) and profile.py.

The version is deploy/onnxruntime-version's, the one deploy/install-peers.sh installs for
/usr/bin/python3; another one installed is refused, so every figure names the ONNX Runtime it
measured. Sessions run on the CPU with every graph optimisation (ORT's default level,
ORT_ENABLE_ALL), THREADS intra-op threads, one inter-op thread and sequential execution:
Fusor's executor under the same thread count runs the groups one after another too."""
import pathlib

import numpy as np
import onnxruntime

ROOT = pathlib.Path(__file__).resolve().parents[2]
PIN_FILE = ROOT / "deploy" / "onnxruntime-version"


def pinned_version():
    return PIN_FILE.read_text().strip()


def check_version():
    """Raises when the installed onnxruntime is not the pinned one."""
    if onnxruntime.__version__ != pinned_version():
        raise RuntimeError(
            f"onnxruntime {onnxruntime.__version__} is installed, the peer bench pins "
            f"{pinned_version()} ({PIN_FILE}): run deploy/install-peers.sh")


def options(threads, profile_prefix=None, optimized_model=None):
    """The session options; `profile_prefix` turns ORT's profiler on (a Chrome-trace JSON named
    PREFIX_<date>.json), `optimized_model` saves the optimised graph there."""
    o = onnxruntime.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    o.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    if profile_prefix is not None:
        o.enable_profiling = True
        o.profile_file_prefix = str(profile_prefix)
    if optimized_model is not None:
        o.optimized_model_filepath = str(optimized_model)
        # Its warning that the saved graph holds this CPU's layouts is what the caller wants.
        o.log_severity_level = 3
        # The weights beside the graph: a model past 2 GB does not fit one protobuf.
        o.add_session_config_entry("session.optimized_model_external_initializers_file_name",
                                   pathlib.Path(optimized_model).name + ".weights")
    return o


def open_session(model, threads, **kwargs):
    check_version()
    return onnxruntime.InferenceSession(str(model), options(threads, **kwargs),
                                        providers=["CPUExecutionProvider"])


def read_feeds(session, input_dir):
    """Each graph input from INPUT_DIR/<input name>.npy (bench/peer_model.h WriteInputs)."""
    return {i.name: np.load(pathlib.Path(input_dir) / f"{i.name}.npy")
            for i in session.get_inputs()}
