"""Fusor from Python: tune a model's operator fusion, inspect it, and run it with the tuned plan.

    import fusor
    result = fusor.tune("model.onnx", db="tuning.db")
    session = fusor.InferenceSession("model.onnx", plan=result.plan)
    outputs = session.run(None, {"input": x})

fusor.Database reads a tuning database's plans. InferenceSession has the shape of onnxruntime.InferenceSession. Failures raise FusorError (or a
subclass) with the message the fusor CLI prints. docs/python.md describes the whole API.
"""

from fusor._fusor import AuthError, FusorError, InvalidArgumentError, UnavailableError
from fusor.database import Database, StoredPlan
from fusor.plan import Plan
from fusor.session import InferenceSession, IOBinding, NodeArg
from fusor.tuning import Client, TuneResult, inspect, tune

__all__ = [
    "AuthError",
    "Client",
    "Database",
    "FusorError",
    "InferenceSession",
    "IOBinding",
    "InvalidArgumentError",
    "NodeArg",
    "Plan",
    "StoredPlan",
    "TuneResult",
    "UnavailableError",
    "inspect",
    "tune",
]
