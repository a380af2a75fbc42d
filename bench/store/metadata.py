"""Model metadata a person states (a grid file's model entry, `metadata = { license = "mit", ... }`), validated
once here and merged over what the model card says.

Why: a model card may be missing, silent or wrong (a checkpoint's card names no license; a config's
max_position_embeddings is not the context the model was trained at). Whoever evaluates a model can state the
six fields a reader judges it by; the stated value wins over the card's, and the result records which fields were
stated (`metadata.stated`), so a reader can tell a measured or card value from a claim. Everything here is
untrusted input: bounded strings, finite non-negative integers, a closed set of license ids, booleans.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from biobench.errors import ConfigError

FIELDS = ("params", "context", "license", "base_model", "training_data", "open_weights")
MAX_TEXT = 200  # a base model id or a corpus name
MAX_TRAINING_DATA = 50  # corpus names
MAX_PARAMS = 10**13  # 10 trillion: any encoder is far below
MAX_CONTEXT = 10**7
# the Hugging Face hub's license ids for the licenses encoders are released under, plus 'other' / 'unknown'
LICENSES = frozenset({
    "apache-2.0", "mit", "bsd-2-clause", "bsd-3-clause", "cc0-1.0", "cc-by-4.0", "cc-by-sa-4.0", "cc-by-nc-4.0",
    "cc-by-nc-sa-4.0", "cc-by-nc-nd-4.0", "cc-by-3.0", "cc-by-sa-3.0", "gpl-3.0", "lgpl-3.0", "agpl-3.0",
    "mpl-2.0", "openrail", "creativeml-openrail-m", "llama2", "llama3", "gemma", "other", "unknown",
})
_TEXT = re.compile(r"[^\x00-\x1f\x7f]+")  # printable: no control characters, no newlines


def _text(value: Any, field: str, where: str) -> str:
    if not isinstance(value, str) or not _TEXT.fullmatch(value) or len(value) > MAX_TEXT:
        raise ConfigError(f"{where}: metadata {field} must be a single-line text of 1 to {MAX_TEXT} characters, "
                          f"not {str(value)[:60]!r}")
    return value


def _count(value: Any, field: str, limit: int, where: str) -> int:
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= limit:
        raise ConfigError(f"{where}: metadata {field} must be a whole number from 0 to {limit:,}, not {value!r}")
    return value


def check_metadata(raw: Any, where: str) -> dict[str, Any]:
    """The stated metadata, validated: {field: value} for the fields given (FIELDS); ConfigError naming `where`,
    the field and what is allowed on anything else (unknown fields included)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: metadata must be a table, e.g. metadata = {{ license = \"mit\", params = 110000000 }}")
    unknown = sorted(str(k) for k in raw if k not in FIELDS)
    if unknown:
        raise ConfigError(f"{where}: unknown metadata field(s) {', '.join(unknown)}; allowed: {', '.join(FIELDS)}")
    out: dict[str, Any] = {}
    for field, value in raw.items():
        if field == "params":
            out[field] = _count(value, field, MAX_PARAMS, where)
        elif field == "context":
            out[field] = _count(value, field, MAX_CONTEXT, where)
        elif field == "license":
            if value not in LICENSES:
                raise ConfigError(f"{where}: metadata license {str(value)[:60]!r} is not a known license id; use "
                                  f"one of {', '.join(sorted(LICENSES))}")
            out[field] = value
        elif field == "base_model":
            out[field] = _text(value, field, where)
        elif field == "training_data":
            names = [value] if isinstance(value, str) else value
            if not isinstance(names, list) or not names or len(names) > MAX_TRAINING_DATA:
                raise ConfigError(f"{where}: metadata training_data must be a corpus name or a list of 1 to "
                                  f"{MAX_TRAINING_DATA} names")
            out[field] = [_text(name, field, where) for name in names]
        elif field == "open_weights":
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: metadata open_weights must be true or false, not {value!r}")
            out[field] = value
    return out


def apply_metadata(model: Mapping[str, Any], stated: Mapping[str, Any]) -> dict[str, Any]:
    """A result's `model` object with the stated metadata over the card's: params and context replace the
    record's own (what every view shows), the other fields go in `metadata`; `metadata.stated` lists the fields
    that were stated, so they read as claims, not measurements."""
    out = dict(model)
    if not stated:
        return out
    metadata = dict(out.get("metadata") or {})
    for field, value in stated.items():
        if field in ("params", "context"):
            out[field] = value
        else:
            metadata[field] = value
    metadata["stated"] = sorted(stated)
    out["metadata"] = metadata
    return out


_COUNT_TEXT = re.compile(r"\s*([0-9][0-9_,]*(?:\.[0-9]+)?)\s*([kKmMbBtT]?)\s*")
_SCALE = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}
_YES, _NO = {"yes", "true", "1", "open"}, {"no", "false", "0", "closed"}


def _count_text(value: Any, field: str, where: str) -> Any:
    """'110M', '1.5B', '110,000,000' -> a whole number (what a form or a command line gives); anything else is
    passed on for `check_metadata` to refuse in its own words."""
    if not isinstance(value, str):
        return value
    found = _COUNT_TEXT.fullmatch(value) if len(value) <= 40 else None
    if found is None:
        raise ConfigError(f"{where}: metadata {field} must be a whole number (e.g. 110000000, 110M or 1.5B), "
                          f"not {value[:40]!r}")
    number = float(found[1].replace(",", "").replace("_", "")) * _SCALE[found[2].lower()]
    return int(number) if math.isfinite(number) and number.is_integer() else number


def metadata_from_fields(where: str, *, params: Any = None, context: Any = None, license: Any = None,
                         base_model: Any = None, training_data: Any = None, open_weights: Any = None
                         ) -> dict[str, Any]:
    """The stated metadata of a form or a command line's options (texts, a form's numbers), validated by
    `check_metadata`, the grid file's validator: empty fields are not stated; counts take 110M / 1.5B; training
    data is a comma-separated list of corpus names (or a list); open weights yes/no (or a boolean)."""
    raw: dict[str, Any] = {}
    for field, value in (("params", params), ("context", context)):
        if value is not None and not (isinstance(value, str) and not value.strip()):
            raw[field] = _count_text(value, field, where)
    for field, value in (("license", license), ("base_model", base_model)):
        if isinstance(value, str) and value.strip():
            raw[field] = value.strip()
        elif value is not None and not isinstance(value, str):
            raw[field] = value
    if isinstance(training_data, str):
        names = [name.strip() for name in training_data.split(",") if name.strip()]
        if names:
            raw["training_data"] = names
    elif training_data is not None:
        raw["training_data"] = training_data
    if isinstance(open_weights, str):
        text = open_weights.strip().lower()
        if text:
            if text not in _YES | _NO:
                raise ConfigError(f"{where}: metadata open_weights must be yes or no, not {open_weights[:40]!r}")
            raw["open_weights"] = text in _YES
    elif open_weights is not None:
        raw["open_weights"] = open_weights
    return check_metadata(raw, where)
