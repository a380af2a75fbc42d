"""Integer ranges on the command line: `--seeds 42-50`, `--seeds 42,44,47`, `--layers 0-3,8`, `--lengths
512,1024`. One parser, so every option accepts the same forms and rejects bad input with the same message."""

from __future__ import annotations

import re

from biobench.errors import ConfigError

_PART = re.compile(r"(-?\d+)(?:\s*-\s*(-?\d+))?")


def parse_ranges(text: str, option: str, *, minimum: int | None = 0) -> list[int]:
    """'42-50' -> 42..50, '42,44' -> [42, 44], '42-44,50' -> [42, 43, 44, 50]: sorted, duplicates dropped,
    blanks around parts ignored. Values below `minimum` (default 0: layers, lengths, sampling seeds) are
    refused; `minimum=None` lets negative values through (evaluation seeds, which name result files).
    `option` names the flag in the error message."""
    def bad(reason: str) -> ConfigError:
        return ConfigError(f"bad {option} value {text!r}: {reason}; use a range like 1-4, a list like 1,3,8 "
                           f"or both (1-4,8)")

    values: set[int] = set()
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        match = _PART.fullmatch(part)
        if not match:
            raise bad(f"{part!r} is not a number or a range")
        low, high = int(match[1]), int(match[2] if match[2] is not None else match[1])
        if high < low:
            raise bad(f"range {part} is reversed (write {high}-{low})")
        if minimum is not None and low < minimum:
            raise bad(f"{low} is below {minimum}")
        values.update(range(low, high + 1))
    if not values:
        raise bad("no value given")
    return sorted(values)
