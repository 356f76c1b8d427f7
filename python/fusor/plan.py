"""fusor.Plan: a fusion plan in its JSON form (graph/plan_json.h, version 2: it names its graph
and target), with the tuner's per-group times when it came from fusor.tune."""

import json


class Plan:
    """A partition of a model's nodes into groups, each run as one kernel.

    groups: the plan JSON's groups ({"kind", "nodes", "recomputed"}), in execution order.
    explain(): one dict per group with its kind, size and the tuner's predicted and measured
    nanoseconds (None where unknown), ready for pandas.DataFrame.
    """

    def __init__(self, plan_json, group_times=None):
        self._json = plan_json
        self._times = group_times

    @classmethod
    def from_json(cls, text):
        """A plan from the text of a plan JSON file (`fusor tune --save-plan`) or its dict."""
        return cls(json.loads(text) if isinstance(text, (str, bytes)) else dict(text))

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            return cls.from_json(f.read())

    def to_json(self, indent=None):
        return json.dumps(self._json, indent=indent)

    def save(self, path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json(indent=2) + "\n")

    @property
    def groups(self):
        return self._json["groups"]

    def explain(self):
        if self._times is not None:
            return [dict(row) for row in self._times]
        return [
            {"group": i, "kind": g["kind"], "nodes": len(g["nodes"]),
             "recomputed": len(g.get("recomputed", [])), "predicted_ns": None, "measured_ns": None}
            for i, g in enumerate(self.groups)
        ]

    def __eq__(self, other):
        return isinstance(other, Plan) and self._json == other._json

    def __repr__(self):
        return f"fusor.Plan({len(self.groups)} groups)"
