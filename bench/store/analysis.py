"""Typed records of the analysis outputs the leaderboard draws (docs/FORMATS.md): CKA per layer (cka.json), the
CKA trajectory of a pretraining run (cka_trajectory.json), needle-in-a-haystack accuracy (needle_results.json),
and the transplant record (transplant.json).

Why records: the plots used to pick string keys out of raw JSON, each with its own tolerance for older layouts.
Here each file is read once, with the store's bounded reader, into a dataclass; what a plot cannot use is a
ResultsError naming the file (a Problems line), never a crash. Older layouts stay readable: cka/1 stored model ids
as strings, early needle files put one model's series at the top level or under `models`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from biobench.errors import ResultsError
from biobench.runtime.jsonfile import object_at
from biobench.store.result_files import read_json_file

ANALYSIS_FILES = {"cka": "cka.json", "needle": "needle_results.json", "cka_trajectory": "cka_trajectory.json"}


def _number(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _listed(data: dict[str, Any], key: str, source: str, name: str) -> list:
    """The list under `key`; ResultsError naming the file when there is none."""
    rows = data.get(key)
    if not isinstance(rows, list):
        raise ResultsError(f"{source}: {name} has no '{key}' list")
    return rows


@dataclass(frozen=True)
class CKALayer:
    layer: int
    divergence: float  # 1 - linear CKA
    ratio: float | None = None  # divergence / the seed-noise model's divergence


@dataclass(frozen=True)
class CKAReport:
    """cka.json: the per-layer divergence of models a and b; `models` maps a role (a, b, noise) to its record
    ({"id", ...}) or, in cka/1 files, its id string."""

    models: dict[str, Any]
    layers: list[CKALayer]
    source: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str) -> CKAReport:
        layers = []
        for r in _listed(data, "layers", source, "cka.json"):
            if not isinstance(r, dict):
                continue
            cka = _number(r.get("cka"))
            divergence = _number(r.get("divergence", 1 - cka if cka is not None else None))
            layer = r.get("layer")
            if isinstance(layer, int) and not isinstance(layer, bool) and divergence is not None:
                layers.append(CKALayer(layer, divergence, _number(r.get("ratio"))))
        models = object_at(data, "models")
        return cls(models, layers, source)


@dataclass(frozen=True)
class TrajectoryPoint:
    tokens: float
    mean_divergence: float
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class CKATrajectory:
    """cka_trajectory.json: mean divergence from the start model against tokens seen, one point per checkpoint."""

    run: str
    points: list[TrajectoryPoint]
    source: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str) -> CKATrajectory:
        rows = _listed(data, "points", source, "cka_trajectory.json")
        points = sorted(
            (TrajectoryPoint(float(p["tokens"]), float(p["mean_divergence"]), _number(p.get("ci_low")),
                             _number(p.get("ci_high")))
             for p in rows if isinstance(p, dict) and _number(p.get("tokens")) is not None
             and _number(p.get("mean_divergence")) is not None),
            key=lambda p: (p.tokens, p.mean_divergence))
        return cls(str(data.get("run", Path(source).parent)), points, source)


def _series(obj: Any) -> list[tuple[str, float]]:
    """{'512': 0.6} | {'512': {'accuracy': 0.6}} | [{'length': 512, 'accuracy': 0.6}] -> [('512', 0.6)]."""
    if isinstance(obj, dict):
        items = list(obj.items())
    elif isinstance(obj, list):
        items = [(next((r[k] for k in ("length", "position", "key", "name", "bucket") if k in r), None), r)
                 for r in obj if isinstance(r, dict)]
    else:
        return []
    out = []
    for key, v in items:
        acc = _number(v.get("accuracy", v.get("acc")) if isinstance(v, dict) else v)
        if key is not None and acc is not None:
            out.append((str(key), acc))
    return out


@dataclass(frozen=True)
class NeedleRun:
    """One model's needle accuracy by haystack length and by needle position (fractions or percent, as written).
    `model`: the model's record ({"id", "slug", "revision"}), its id, or the name it was stored under."""

    model: Any
    by_length: list[tuple[str, float]]
    by_position: list[tuple[str, float]]


@dataclass(frozen=True)
class NeedleResults:
    runs: list[NeedleRun]
    source: str = ""
    empty: list[str] = field(default_factory=list)  # models of the file without a by_length/by_position series

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str) -> NeedleResults:
        models = data.get("models")
        if isinstance(models, dict) and models and all(isinstance(v, dict) for v in models.values()):
            named = [(str(k), v) for k, v in models.items()]
        else:  # `biobench analyze needle` writes one model's series at the top level
            named = [(data.get("model") or Path(source).parent.name, data)]
        runs, empty = [], []
        for model, run in named:
            by_len = _series(run.get("by_length", run.get("length")))
            by_pos = _series(run.get("by_position", run.get("position")))
            if by_len or by_pos:
                runs.append(NeedleRun(model, by_len, by_pos))
            else:
                empty.append(str(model.get("id") if isinstance(model, dict) else model))
        return cls(runs, source, empty)


@dataclass(frozen=True)
class Transplant:
    """transplant.json: which encoder layers of `source` were copied into `into` (`biobench analyze transplant`)."""

    source: str
    into: str
    layers: list[int]
    component: str
    copied: list[str] = field(default_factory=list)
    n_tensors: int = 0
    n_params: int = 0
    schema: str = "biobench.transplant/1"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {"schema": data.pop("schema"), "from": data.pop("source"), **data}

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str) -> Transplant:
        try:
            return cls(str(data["from"]), str(data["into"]), [int(x) for x in data["layers"]], str(data["component"]),
                       [str(x) for x in data.get("copied", [])], int(data.get("n_tensors", 0)),
                       int(data.get("n_params", 0)), str(data.get("schema", cls.schema)))
        except (KeyError, TypeError, ValueError) as err:
            raise ResultsError(f"{source}: not a transplant record ({type(err).__name__}: {err})") from None


ANALYSIS_RECORDS: dict[str, Callable[[dict[str, Any], str], Any]] = {
    "cka": CKAReport.from_dict, "needle": NeedleResults.from_dict, "cka_trajectory": CKATrajectory.from_dict,
    "transplant": Transplant.from_dict,
}


def read_analysis(path: str | Path, kind: str) -> Any:
    """The record of an analysis file of `kind` (a key of ANALYSIS_RECORDS); ResultsError naming the file when it
    is refused by the bounded reader, not a JSON object, or lacks what its record needs."""
    data = read_json_file(path, what="analysis file")
    if not isinstance(data, dict):
        raise ResultsError(f"{path}: not a JSON object")
    return ANALYSIS_RECORDS[kind](data, str(path))
