"""fusor.Database: a tuning database read as `fusor db query` and `fusor db show` read it, read-only:
stored plans with their staleness, the measurements behind them, the tuning history and counts."""

import dataclasses
import datetime
import json
import os

from fusor import _fusor
from fusor.plan import Plan
from fusor.tuning import inspect


@dataclasses.dataclass
class StoredPlan:
    """A plan as stored for one graph, target, cost-model version and search options. Times are
    nanoseconds; measured ones are None when the plan was not measured. A stale plan (scored by
    another cost model, or older than its target's latest calibration) is never served as
    current; stale_reason says why."""

    plan: Plan  # With the tuner's per-group times in explain(); None if its graph is missing.
    graph_hash: str
    model_name: str
    target: str
    cost_model_version: str
    search_options: str
    predicted_ns: float
    measured_ns: float
    unfused_predicted_ns: float
    unfused_measured_ns: float
    speedup: float  # Unfused over fused (measured when both were), None when unknown.
    peak_memory_bytes: int
    created_unix_ms: int
    stale: bool
    stale_reason: str
    database: str  # The file the plan came from (a snapshot's, when read through one).

    @property
    def created(self):
        return datetime.datetime.fromtimestamp(self.created_unix_ms / 1e3, datetime.timezone.utc)


def _stored_plan(d):
    d = dict(d)
    text, groups = d.pop("plan_json"), d.pop("groups")
    plan = Plan(json.loads(text), group_times=groups) if text is not None else None
    return StoredPlan(plan=plan, **d)


def _error(cls, message, code, exit_code):
    """A FusorError raised here, with the code and exit code the engine's would carry."""
    error = cls(message)
    error.code, error.exit_code = code, exit_code
    return error


def _listing_order(p):
    """`fusor db show`'s order (db/plan_order.h's BetterPlan behind current-first): current plans
    first; then measured before unmeasured, the lower time, the newer plan."""
    return (p.stale, p.measured_ns is None, p.measured_ns or p.predicted_ns, -p.created_unix_ms)


def _unix_ms(when, name):
    """A bound of `since` / `until`: a datetime (naive means UTC), a timedelta ago, or
    milliseconds since the epoch; None for no bound (0)."""
    if when is None:
        return 0
    if isinstance(when, datetime.timedelta):
        when = datetime.datetime.now(datetime.timezone.utc) - when
    if isinstance(when, datetime.datetime):
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.timezone.utc)
        return int(when.timestamp() * 1000)
    if isinstance(when, int) and not isinstance(when, bool):
        return when
    raise _error(_fusor.InvalidArgumentError,
                 f"{name}={when!r} is not a time: use a datetime, a timedelta ago or milliseconds "
                 "since the epoch", "InvalidArgument", 4)


class Database:
    """A tuning database opened read-only: a SQLite file, sqlite:PATH, postgresql://... or a
    `fusor db export` snapshot; None for the per-user default (as the CLI's). snapshots are
    read-only layers under it, as `fusor db --snapshot`. Plans are judged stale against
    cost_model_version (None: each target's calibrated version). Nothing is ever written, not even
    a schema migration. Safe to use from several threads."""

    def __init__(self, path_or_uri=None, snapshots=(), cost_model_version=None):
        self._db = _fusor.Database(os.fspath(path_or_uri) if path_or_uri else "",
                                   [os.fspath(s) for s in snapshots], cost_model_version or "")

    def query(self, model=None, target=None, graph=None, since=None, until=None, min_speedup=0,
              current=False, limit=None):
        """Stored plans, newest first, with `fusor db query`'s filters: model (the graph's model
        name), target (id), graph (a hash or its prefix), since / until (created at or after /
        before), min_speedup, current (leave out stale plans); at most `limit` (None: all)."""
        if limit is not None and limit < 1:
            raise _error(_fusor.InvalidArgumentError,
                         f"limit={limit}: give at least 1, or None for all", "InvalidArgument", 4)
        plans, token = [], ""
        while limit is None or len(plans) < limit:
            page_size = _fusor.MAX_PAGE_SIZE if limit is None else min(limit - len(plans),
                                                                       _fusor.MAX_PAGE_SIZE)
            page, token = self._db.query(model or "", target or "", graph or "",
                                         _unix_ms(since, "since"), _unix_ms(until, "until"),
                                         float(min_speedup), bool(current), page_size, token)
            plans.extend(_stored_plan(p) for p in page)
            if not token:
                break
        return plans

    def plans(self, graph, target=None):
        """Every stored plan of the one graph `graph` (a hash or a prefix naming one graph), as
        `fusor db show` lists them: current plans first, best first, then stale ones. Raises
        FusorError (NotFound) when there is none, InvalidArgumentError when the prefix names
        several graphs."""
        found = self.query(graph=graph, target=target)
        graphs = sorted({p.graph_hash for p in found})
        if not graphs:
            on = f" on target '{target}'" if target else ""
            raise _error(_fusor.FusorError, f"no plan for a graph with hash '{graph}'{on}",
                         "NotFound", 1)
        if len(graphs) > 1:
            raise _error(_fusor.InvalidArgumentError,
                         f"graph hash prefix '{graph}' matches {len(graphs)} graphs "
                         f"({', '.join(graphs[:2])}, ...); give more digits", "InvalidArgument", 4)
        return sorted(found, key=_listing_order)

    def best_plan(self, model_or_hash, target=None, dims=None, shapes=None):
        """The plan an InferenceSession given this database runs for the graph on the target
        (None: this CPU's): the best current one, or None when every stored plan is stale or there
        is none. model_or_hash is the graph's full hash, or an ONNX path hashed as fusor.inspect
        does with dims and shapes."""
        graph_hash = model_or_hash
        if isinstance(model_or_hash, os.PathLike) or os.path.isfile(model_or_hash):
            graph_hash = inspect(model_or_hash, dims=dims, shapes=shapes)["canonical_hash"]
        best = self._db.best(graph_hash, target or "")
        return _stored_plan(best) if best is not None else None

    def measurements(self, plan):
        """The timings stored with a StoredPlan, whole plan first (group None), then by group:
        dicts with group, median_ns, spread (interquartile range over median), samples_ns,
        measured_unix_ms and agent_id (None when this host timed it)."""
        return self._db.measurements(plan.graph_hash, plan.target, plan.cost_model_version,
                                     plan.search_options)

    def history(self, graph=None, target=None, limit=100):
        """The tuning history, newest first: dicts with at_unix_ms, event ("stored", "replaced",
        "imported", "deleted", "expired", "calibrated"), the plan's key, its times and detail."""
        return self._db.history(graph or "", target or "", int(limit))

    def stats(self):
        """One dict per database file (the database, then each snapshot): counts of targets,
        graphs, plans, stale plans, measurements and calibration runs, and per-target rows."""
        return self._db.stats()
