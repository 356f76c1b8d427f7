# fusor.tune, fusor.Plan and fusor.inspect over a real SQLite tuning database, and sessions running
# the plans they give.
import numpy as np
import pytest

import fusor
from conftest import filled_model, random_feed

# Small enough for a test: greedy search and two measurements, without calibrating the CPU first.
FAST = dict(algorithm="greedy", budget=2, calibrate=False)


@pytest.fixture(scope="module")
def tuned(squeezenet, tmp_path_factory):
    db = tmp_path_factory.mktemp("tune") / "tuning.db"
    stages = []
    result = fusor.tune(squeezenet, db=db, progress=lambda s, f, d: stages.append(s), **FAST)
    return db, result, stages


def test_tune_returns_a_plan_with_times_and_stores_it(tuned, squeezenet):
    db, result, stages = tuned
    assert db.exists()
    assert not result.cache_hit
    assert result.plan.groups and result.predicted_ns > 0
    assert len(result.graph_hash) == 64
    assert result.graph_hash == fusor.inspect(squeezenet)["canonical_hash"]
    assert "search" in stages
    rows = result.plan.explain()
    assert len(rows) == len(result.plan.groups)
    # A concatenation written in place by its producers is predicted to cost nothing.
    assert all(r["predicted_ns"] >= 0 for r in rows)
    assert sum(r["predicted_ns"] for r in rows) > 0


def test_tuning_again_is_a_cache_hit_with_the_same_plan(tuned, squeezenet):
    db, first, _ = tuned
    again = fusor.tune(squeezenet, db=db, **FAST)
    assert again.cache_hit
    assert again.plan == first.plan


def test_a_session_takes_the_tuned_plan_from_the_database_or_the_plan(tuned, squeezenet):
    db, result, _ = tuned
    rules = fusor.InferenceSession(squeezenet)
    from_db = fusor.InferenceSession(squeezenet, db=db)
    from_plan = fusor.InferenceSession(squeezenet, plan=result.plan)
    assert from_db.plan_source.startswith(f"tuning database {db}")
    assert from_plan.plan_source.startswith("plan JSON ")
    feed = random_feed(rules)
    expected = rules.run(None, feed)[0]
    scale = float(np.max(np.abs(expected)))
    for session in (from_db, from_plan):
        np.testing.assert_allclose(session.run(None, feed)[0], expected, rtol=1e-4,
                                   atol=1e-4 * scale)


def test_a_plan_survives_json_and_a_file(tuned, tmp_path):
    _, result, _ = tuned
    assert fusor.Plan.from_json(result.plan.to_json()) == result.plan
    path = tmp_path / "plan.json"
    result.plan.save(path)
    assert fusor.Plan.load(path) == result.plan
    session = fusor.InferenceSession(filled_model("squeezenet1_1"), plan=str(path))
    assert session.plan_source == f"plan JSON {path} ({len(result.plan.groups)} groups)"


def test_an_exception_in_the_progress_callback_cancels_the_tune_and_propagates(squeezenet,
                                                                                tmp_path):
    def stop(stage, fraction, detail):
        raise KeyboardInterrupt("stop")

    with pytest.raises(KeyboardInterrupt, match="stop"):
        fusor.tune(squeezenet, db=tmp_path / "tuning.db", progress=stop, **FAST)


def test_tune_of_a_missing_model_raises_the_cli_message(tmp_path):
    with pytest.raises(fusor.FusorError, match="model file '/nonexistent.onnx' does not exist"):
        fusor.tune("/nonexistent.onnx", db=tmp_path / "tuning.db", **FAST)


def test_inspect_gives_the_model_summary(squeezenet):
    summary = fusor.inspect(squeezenet)
    assert summary["nodes"] == 65 and summary["nodes_per_op"]["Conv"] == 26
    assert summary["inputs"] == [{"name": "input", "type": "float32[1x3x224x224]"}]
