"""fusor.tune and fusor.inspect: `fusor tune` and `fusor inspect` in-process, locally over a
tuning database or remotely on a fusord (fusor.Client)."""

import dataclasses
import json
import os

from fusor import _fusor
from fusor.plan import Plan


class Client:
    """A fusord to tune on: address "host:port" or "unix:PATH", with the CLI's connection flags
    (client/connection.h): the bearer token in token_file, TLS with the system roots (tls=True) or
    the roots in tls_ca, timeout_s per call."""

    def __init__(self, server, token_file=None, tls=False, tls_ca=None,
                 allow_insecure_remote=False, timeout_s=0):
        self.server = server
        self.token_file = token_file
        self.tls = tls
        self.tls_ca = tls_ca
        self.allow_insecure_remote = allow_insecure_remote
        self.timeout_s = timeout_s

    def _options(self):
        o = _fusor.ConnectionOptions()
        o.server = self.server
        o.token_file = os.fspath(self.token_file) if self.token_file else ""
        o.tls = self.tls
        o.tls_ca = os.fspath(self.tls_ca) if self.tls_ca else ""
        o.allow_insecure_remote = self.allow_insecure_remote
        o.timeout_s = self.timeout_s
        return o


@dataclasses.dataclass
class TuneResult:
    """One tuned binding of the model's dims. Times are nanoseconds; measured ones are None when
    the plan was not measured (unmeasured_reason says why, when the tuner gave one)."""

    plan: Plan
    binding: str  # "batch=8" for a binding of dims; "" without dims.
    graph_hash: str
    target: str
    cost_model_version: str
    cache_hit: bool  # The plan came from the database unchanged.
    predicted_ns: float
    unfused_predicted_ns: float
    measured_ns: float
    unfused_measured_ns: float
    measured_by: str
    unmeasured_reason: str
    peak_memory_bytes: int

    @property
    def speedup(self):
        """Unfused over fused time: measured when both were measured, else predicted."""
        if self.measured_ns and self.unfused_measured_ns:
            return self.unfused_measured_ns / self.measured_ns
        return self.unfused_predicted_ns / self.predicted_ns


def _dims_flags(dims):
    """{"batch": [1, 8], "seq": 128} as the CLI's --dim values ("batch=1,8", "seq=128")."""
    flags = []
    for name, values in (dims or {}).items():
        values = values if isinstance(values, (list, tuple)) else [values]
        flags.append(f"{name}=" + ",".join(str(int(v)) for v in values))
    return flags


def _shape_flags(shapes):
    """{"input": [1, 3, 224, 224]} as the CLI's --shape values ("input=1x3x224x224")."""
    return [f"{name}=" + "x".join(str(int(d)) for d in dims) for name, dims in (shapes or {}).items()]


def _result(d):
    d = dict(d)
    plan = Plan(json.loads(d.pop("plan_json")), group_times=d.pop("groups"))
    return TuneResult(plan=plan, **d)


def tune(model, algorithm="default", dims=None, shapes=None, db=None, client=None, budget=0,
         time_limit_s=0, seed=1, memory_budget=0, target=None, force=False, no_residual=False,
         calibrate=True, progress=None):
    """Tunes `model` (an ONNX path) as `fusor tune` does and returns its TuneResult; a list of
    them, one per binding in order, when dims gives several values for a dim
    ({"batch": [1, 8]}).

    Locally (no client) the tuning database is `db` (a SQLite file, sqlite:PATH or
    postgresql://...; None: the per-user default) and a CPU never calibrated is calibrated first
    (about 10 s) unless calibrate=False; with client=fusor.Client(...) the fusord tunes.
    progress(stage, fraction, detail) is called as the tune goes; an exception it raises cancels
    the tune and propagates.
    """
    settings = _fusor.TuneSettings()
    settings.algorithm = algorithm
    settings.budget = budget
    settings.time_limit_s = time_limit_s
    settings.seed = seed
    settings.memory_budget = memory_budget
    settings.target = target or ""
    settings.force = force
    settings.no_residual = no_residual
    if client is not None and db is not None:
        raise _fusor.InvalidArgumentError("db is for local tuning; a client's server has its own")
    connection = client._options() if client is not None else _fusor.ConnectionOptions()
    connection.db_path = os.fspath(db) if db else ""
    results = _fusor.tune(os.fspath(model), _shape_flags(shapes), _dims_flags(dims), settings,
                          connection, calibrate, progress)
    several = any(isinstance(v, (list, tuple)) and len(v) > 1 for v in (dims or {}).values())
    return [_result(r) for r in results] if several else _result(results[0])


def inspect(model, dims=None, shapes=None):
    """`fusor inspect --json` as a dict: the model's ops, FLOPs, bytes and graph hash."""
    return json.loads(_fusor.inspect(os.fspath(model), _shape_flags(shapes), _dims_flags(dims)))
