# fusor.Database over a real SQLite tuning database made by a real tune, held to what the fusor CLI
# (`fusor db query --json`, FUSOR_CLI) reads from the same file, and its errors to the CLI's.
import datetime
import json
import os
import subprocess

import pytest

import fusor

# Small enough for a test: greedy search and two measurements, without calibrating the CPU first.
FAST = dict(algorithm="greedy", budget=2, calibrate=False)


@pytest.fixture(scope="module")
def tuned(squeezenet, tmp_path_factory):
    db = tmp_path_factory.mktemp("database") / "tuning.db"
    return db, fusor.tune(squeezenet, db=db, **FAST)


def cli(*args):
    """The fusor CLI's exit code, stdout and stderr."""
    done = subprocess.run([os.environ["FUSOR_CLI"], *map(str, args)], capture_output=True,
                          text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


def test_query_lists_the_tuned_plan_as_the_cli_does(tuned):
    db, result = tuned
    plans = fusor.Database(db).query()
    assert len(plans) == 1
    p = plans[0]
    assert (p.graph_hash, p.target, p.cost_model_version) == (
        result.graph_hash, result.target, result.cost_model_version)
    assert p.model_name and not p.stale and p.stale_reason == ""
    assert p.plan == result.plan and p.plan.explain() == result.plan.explain()
    code, out, _ = cli("db", "query", "--json", "--db", db)
    assert code == 0
    (theirs,) = json.loads(out)["plans"]
    for field in ("graph_hash", "model_name", "cost_model_version", "search_options",
                  "predicted_ns", "measured_ns", "unfused_predicted_ns", "unfused_measured_ns",
                  "speedup", "peak_memory_bytes", "created_unix_ms", "stale", "stale_reason",
                  "database"):
        assert getattr(p, field) == theirs[field], field
    assert p.target == theirs["target_id"]


def test_query_filters_select_and_leave_out(tuned):
    db, result = tuned
    database = fusor.Database(db)
    assert len(database.query(graph=result.graph_hash[:8], target=result.target)) == 1
    assert database.query(graph="0" * 64 if result.graph_hash[0] != "0" else "1" * 64) == []
    assert database.query(model="no such model") == []
    assert database.query(since=datetime.timedelta(hours=1)) != []
    assert database.query(until=datetime.datetime(2000, 1, 1)) == []
    assert database.query(min_speedup=1e9) == []
    assert len(database.query(limit=1)) == 1


def test_best_plan_is_the_one_a_session_given_the_database_runs(tuned, squeezenet):
    db, result = tuned
    database = fusor.Database(db)
    best = database.best_plan(squeezenet)
    assert best is not None and best.plan == result.plan
    assert database.best_plan(result.graph_hash, target=result.target).plan == result.plan
    session = fusor.InferenceSession(squeezenet, db=db)
    assert session.plan_source.startswith(f"tuning database {db}, target {best.target}")
    assert database.best_plan("0" * 64) is None


def test_a_plan_judged_by_another_cost_model_is_stale_and_never_best(tuned):
    db, result = tuned
    database = fusor.Database(db, cost_model_version="some-other-version")
    (p,) = database.query()
    assert p.stale and "some-other-version" in p.stale_reason
    assert database.query(current=True) == []
    assert database.best_plan(result.graph_hash, target=result.target) is None
    assert database.plans(result.graph_hash[:12])[0].stale


def test_measurements_history_and_stats_read_the_tune(tuned):
    db, result = tuned
    database = fusor.Database(db)
    (p,) = database.plans(result.graph_hash[:12])
    measurements = database.measurements(p)
    if result.measured_ns is not None:
        assert measurements[0]["group"] is None
        assert measurements[0]["median_ns"] > 0 and measurements[0]["samples_ns"]
    events = database.history(graph=result.graph_hash)
    assert [e["event"] for e in events] == ["stored"]
    (stats,) = database.stats()
    assert stats["plans"] == 1 and stats["graphs"] == 1 and stats["stale_plans"] == 0


def test_reading_never_writes_the_file(tuned):
    db, _ = tuned
    before = db.stat().st_mtime_ns, db.read_bytes()
    database = fusor.Database(db)
    database.query()
    database.stats()
    assert (db.stat().st_mtime_ns, db.read_bytes()) == before


def test_a_missing_database_raises_the_cli_message(tmp_path):
    missing = tmp_path / "missing.db"
    with pytest.raises(fusor.FusorError) as e:
        fusor.Database(missing)
    code, _, err = cli("db", "query", "--db", missing)
    assert err.strip() == f"fusor db query: {e.value}"
    assert (e.value.code, e.value.exit_code) == ("NotFound", code)
    assert not missing.exists()


def test_a_file_that_is_not_a_database_raises_the_cli_message(tmp_path):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database" * 100)
    with pytest.raises(fusor.FusorError) as e:
        fusor.Database(garbage).query()
    code, _, err = cli("db", "query", "--db", garbage)
    assert err.strip() == f"fusor db query: {e.value}"
    assert e.value.exit_code == code


def test_a_prefix_naming_no_graph_is_not_found_as_in_db_show(tuned):
    db, result = tuned
    with pytest.raises(fusor.FusorError, match="no plan for a graph with hash 'ffff0000'") as e:
        fusor.Database(db).plans("ffff0000")
    code, _, err = cli("db", "show", "ffff0000", "--db", db)
    assert err.strip() == f"fusor db show: {e.value}"
