# examples/python_tune_and_run.py as a user runs it: it tunes the filled squeezenet1_1, runs it,
# compares with ONNX Runtime and writes the per-group times it plots, which must be the stored
# plan's (read back through fusor.Database).
import csv
import pathlib
import re
import subprocess
import sys

import pytest

import fusor

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python_tune_and_run.py"


@pytest.fixture(scope="module")
def example_run(squeezenet, tmp_path_factory):
    out = tmp_path_factory.mktemp("example")
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), str(squeezenet), "--db", str(out / "tuning.db"),
         "--budget", "2", "--no-calibrate", "--plot", str(out / "groups.png")],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return out, done.stdout


def test_the_example_matches_onnx_runtime_within_1e4(example_run):
    _, stdout = example_run
    assert re.search(r"tuned: \d+ groups", stdout)
    errors = re.findall(r"max \|fusor - onnxruntime\| / max \|onnxruntime\| = (\S+)", stdout)
    if "onnxruntime is not installed" not in stdout:
        assert errors and all(float(e) < 1e-4 for e in errors), stdout


def test_the_plotted_group_times_are_the_stored_plans(example_run, squeezenet):
    out, stdout = example_run
    with open(out / "groups.csv", encoding="utf-8") as f:
        plotted = list(csv.DictReader(f))
    stored = fusor.Database(out / "tuning.db").best_plan(squeezenet).plan.explain()
    assert len(plotted) == len(stored) > 1
    for row, group in zip(plotted, stored):
        assert (int(row["group"]), row["kind"], int(row["nodes"])) == (
            group["group"], group["kind"], group["nodes"])
        assert float(row["predicted_us"]) == pytest.approx(group["predicted_ns"] / 1e3, abs=1e-3)
    # The chart needs matplotlib; without it the example says so and still writes the data.
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib is not installed" in stdout and not (out / "groups.png").exists()
    else:
        assert (out / "groups.png").stat().st_size > 0
