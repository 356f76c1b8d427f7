"""fusor.InferenceSession: the engine (engine/engine.h) with the interface of
onnxruntime.InferenceSession, so switching runtimes is a one-line change."""

import contextlib
import os
import tempfile

import numpy as np

from fusor import _fusor
from fusor.plan import Plan

# ONNX Runtime's type strings for the engine's dtype names.
_ORT_TYPES = {"float32": "float", "float64": "double"}


class NodeArg:
    """A model input or output: name, shape (ints) and type ("tensor(float)"), as onnxruntime's."""

    def __init__(self, name, dtype, shape):
        self.name = name
        self.shape = list(shape)
        self.type = f"tensor({_ORT_TYPES.get(dtype, dtype)})"
        self.dtype = np.dtype(dtype) if dtype != "bfloat16" else np.dtype("float32")

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape})"


@contextlib.contextmanager
def _file_holding(data, suffix):
    """A temporary file with `data` for the engine to read; removed after Load (the engine keeps
    nothing of the file)."""
    fd, path = tempfile.mkstemp(suffix=suffix, prefix="fusor-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
    finally:
        os.unlink(path)


def _model(path_or_bytes):
    """The model for the engine: its bytes (loaded from memory), or its path."""
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return bytes(path_or_bytes)
    return os.fspath(path_or_bytes)


@contextlib.contextmanager
def _plan_path(plan):
    if plan is None:
        yield ""
    elif isinstance(plan, Plan):
        with _file_holding(plan.to_json().encode(), ".json") as path:
            yield path
    else:
        yield os.fspath(plan)


class InferenceSession:
    """Loads a model with its weights, takes a plan and compiles it once; run() as often as liked.

    path_or_bytes: an ONNX file (external weight files beside it are read) or its bytes.
    plan: None, a plan JSON path or a fusor.Plan. Without one, the best plan stored in `db` (a
      tuning database or `fusor db export` snapshot) for this model and CPU; else the rules plan.
      plan_source says which was taken and why.
    threads: OpenMP threads for every kernel (None: the process default).
    dims: values for the model's symbolic dims ({"batch": 8}); bind the dims the plan was tuned
      for. target: the target id whose plans `db` is asked for (None: this CPU's).

    concurrent_runs: how many run() calls from different threads proceed at once (the GIL is
    released while one runs), each on a context with its own arena and copy of the prepacked
    weights; further callers wait. Every context computes the same values.
    """

    def __init__(self, path_or_bytes, plan=None, db=None, threads=None, dims=None, target=None,
                 concurrent_runs=1):
        with _plan_path(plan) as plan_json:
            self._engine = _fusor.Engine(_model(path_or_bytes), plan_json,
                                         os.fspath(db) if db else "", threads or 0,
                                         dict(dims or {}), target or "", concurrent_runs)
        self._inputs = [NodeArg(*t) for t in self._engine.inputs()]
        self._outputs = [NodeArg(*t) for t in self._engine.outputs()]

    @property
    def plan_source(self):
        """Where the plan came from: "plan JSON PATH (N groups)", "tuning database PATH, target T
        (N groups)" or "rules plan (N groups): REASON"."""
        return self._engine.plan_source

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def run(self, output_names, input_feed, run_options=None):
        """The outputs named in output_names (None: all, in the model's order) as NumPy arrays,
        for input_feed {name: array}. C-contiguous arrays are read in place (float32 and int64
        as they are, other dtypes converted by the engine); only the outputs named are read."""
        del run_options  # Accepted for onnxruntime compatibility; the engine has none.
        return self._engine.run(None if output_names is None else list(output_names), input_feed)

    def io_binding(self):
        """An IOBinding over arrays the caller holds, as onnxruntime's io_binding(): bind every
        input and the outputs wanted, then run_with_iobinding() as often as liked."""
        return IOBinding(self)

    def run_with_iobinding(self, iobinding, run_options=None):
        """Runs the model on the binding's inputs' current values into its output arrays."""
        del run_options  # Accepted for onnxruntime compatibility; the engine has none.
        iobinding._bound().run()


class IOBinding:
    """Inputs and outputs bound to NumPy arrays for InferenceSession.run_with_iobinding. Each run
    reads the inputs' current values where they are and the engine writes the outputs into their
    arrays: float32 and int64 tensors are neither copied nor converted (copied_bytes counts what
    was). Binding again after a run compiles a new context at the next run."""

    def __init__(self, session):
        self._session = session
        self._inputs = {}
        self._outputs = {}
        self._binding = None

    def bind_cpu_input(self, name, array):
        """Reads `array` (C-contiguous, kept and read at every run) as input `name`."""
        array = np.asarray(array)
        if not array.flags.c_contiguous:
            raise _fusor.InvalidArgumentError(
                f"input '{name}' is not C-contiguous: a binding reads its array in place, so give "
                "np.ascontiguousarray(...)")
        self._inputs[name] = array
        self._binding = None

    def bind_output(self, name, array=None):
        """Writes output `name` into `array` (C-contiguous, writable), or into an array of the
        model's shape and dtype allocated here when None."""
        if array is None:
            meta = {o.name: o for o in self._session.get_outputs()}
            if name not in meta:
                raise _fusor.InvalidArgumentError(
                    f"'{name}' is not an output of the model (its outputs: "
                    + ", ".join(f"'{n}'" for n in meta) + ")")
            array = np.empty(meta[name].shape, meta[name].dtype)
        if not (array.flags.c_contiguous and array.flags.writeable):
            raise _fusor.InvalidArgumentError(
                f"output '{name}' must be a C-contiguous, writable array")
        self._outputs[name] = array
        self._binding = None

    def get_outputs(self):
        """The output arrays, in the order bound: the arrays the engine writes (not copies)."""
        return list(self._outputs.values())

    def copy_outputs_to_cpu(self):
        """Copies of the output arrays, as onnxruntime's IOBinding gives."""
        return [a.copy() for a in self._outputs.values()]

    @property
    def copied_bytes(self):
        """Bytes the last run copied between the arrays and the engine's arena: 0 when every
        bound tensor was read or written in place."""
        return self._binding.copied_bytes if self._binding is not None else 0

    def _bound(self):
        if self._binding is None:
            self._binding = self._session._engine.bind(self._inputs, self._outputs)
        return self._binding
