# Fixtures of the fusor Python package's tests (tests/python/CMakeLists.txt runs them with the
# package from the build tree on PYTHONPATH and the filled models in FUSOR_FILLED_DIR).
import os
import pathlib

import numpy as np
import pytest


def filled_model(name):
    """A bundled model with its weights filled by tools/fill_weights.py (ctest fixture
    filled_models)."""
    path = pathlib.Path(os.environ["FUSOR_FILLED_DIR"]) / f"{name}.onnx"
    if not path.exists():
        pytest.fail(f"{path} is missing: run the tests through ctest, which fills it first")
    return path


def random_feed(session, seed=0):
    """One array per input of `session`, seeded: floats in [-1, 1], integers (token ids) in
    [0, 100)."""
    rng = np.random.default_rng(seed)
    return {
        i.name: rng.uniform(-1, 1, i.shape).astype(i.dtype) if i.dtype.kind == "f"
        else rng.integers(0, 100, i.shape).astype(i.dtype)
        for i in session.get_inputs()
    }


@pytest.fixture(scope="session")
def squeezenet():
    return filled_model("squeezenet1_1")
