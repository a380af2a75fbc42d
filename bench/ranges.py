"""Integer ranges and numbers on the command line: `--seeds 42-50`, `--seeds 42,44,47`, `--layers 0-3,8`,
`--lengths 512,1024`, `--lr 3e-5`, `--lease-seconds 600`. One parser, so every option accepts the same forms and
rejects bad input with the same message — before anything runs.

Why bounded: a range is expanded into a list that lands in request files, result names and web pages;
`--seeds 0-10000000` once wrote a 109 MB request and `0-3000000` took 23 s of a public server's CPU. A value
with thousands of digits is refused before `int()` sees it (Python refuses ints past 4,300 digits with a
traceback). Non-finite numbers (`nan`, `inf`) pass `float()` and then poison every result; they are refused here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from biobench.errors import ConfigError

_PART = re.compile(r"(-?\d{1,20})(?:\s*-\s*(-?\d{1,20}))?")
MAX_VALUES = 1000  # layers, lengths, sampling seeds: far above any real use
MAX_SEEDS = 256  # evaluation seeds: the protocol uses 5 or 9
SEED_MAX = 2**32 - 1  # numpy's seed range; torch and random accept it too


def parse_ranges(text: str, option: str, *, minimum: int | None = 0, maximum: int | None = None,
                 max_count: int = MAX_VALUES) -> list[int]:
    """'42-50' -> 42..50, '42,44' -> [42, 44], '42-44,50' -> [42, 43, 44, 50]: sorted, duplicates dropped,
    blanks around parts ignored. Values below `minimum` (default 0) or above `maximum` are refused, and so is
    a list of more than `max_count` values (counted before it is expanded); `minimum=None` lets negative
    values through. `option` names the flag in the error message."""
    def bad(reason: str) -> ConfigError:
        return ConfigError(f"bad {option} value {str(text)[:60]!r}: {reason}; use a range like 1-4, a list like "
                           f"1,3,8 or both (1-4,8)")

    spans: list[tuple[int, int]] = []
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        match = _PART.fullmatch(part)
        if not match:
            raise bad(f"{part[:40]!r} is not a number or a range")
        low, high = int(match[1]), int(match[2] if match[2] is not None else match[1])
        if high < low:
            raise bad(f"range {part} is reversed (write {high}-{low})")
        if minimum is not None and low < minimum:
            raise bad(f"{low} is below {minimum}")
        if maximum is not None and high > maximum:
            raise bad(f"{high} is above {maximum}")
        spans.append((low, high))
        if sum(h - lo + 1 for lo, h in spans) > max_count:
            raise bad(f"more than {max_count} values")
    values = {v for low, high in spans for v in range(low, high + 1)}
    if not values:
        raise bad("no value given")
    return sorted(values)


# A count with a unit suffix (`--tokens 2M`, `save_every = "500K"`): at most MAX_COUNT, 1e15 tokens, twenty times
# the largest corpus a run of this suite plans (the paper's 50B, x20,000 margin). Checked here, before any int()
# of it (a 400-digit count became float('inf') and an OverflowError traceback) and before any allocation or loop
# sized by it.
COUNT_SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}
MAX_COUNT = 10**15
_COUNT = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMBGT]?)\s*")


def parse_count(value: str | int, what: str = "token count", maximum: int = MAX_COUNT) -> int:
    """'2M' -> 2_000_000, '1.5B', '500K', '12345' (an int is taken as it is): a whole count from 0 to `maximum`;
    ConfigError naming `what` otherwise, before any work is sized by it."""
    shown = str(value) if len(str(value)) <= 40 else f"{str(value)[:20]}... ({len(str(value)):,} characters)"
    over = ConfigError(f"{what} {shown!r}: over the limit of {maximum:.0e} (the paper's runs are 10B-50B)")
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ConfigError(f"{what} {shown}: give a positive number, e.g. 2M")
        if value > maximum:
            raise over
        return value
    text = str(value)
    match = _COUNT.fullmatch(text.upper()) if len(text) <= 100 else None
    if match is None:
        if len(text) > 100 and text.strip().isdigit():
            raise over
        raise ConfigError(f"{what} {shown!r}: expected a number with an optional K/M/B/T suffix, e.g. 2M")
    number = float(match[1]) * COUNT_SUFFIXES[match[2]]  # float() of 100 digits is finite; int() never sees more
    if not math.isfinite(number) or number > maximum:
        raise over
    return round(number)


def format_ranges(values: list[int]) -> str:
    """parse_ranges' inverse: [0, 1, 2, 3, 8] -> '0-3,8' (sorted, duplicates dropped)."""
    spans: list[list[int]] = []
    for v in sorted(set(values)):
        if spans and v == spans[-1][1] + 1:
            spans[-1][1] = v
        else:
            spans.append([v, v])
    return ",".join(f"{lo}-{hi}" if hi > lo else str(lo) for lo, hi in spans)


def parse_seeds(text: str, option: str = "--seeds") -> list[int]:
    """Evaluation seeds: 0..2**32-1, at most MAX_SEEDS of them (they name result files and fill requests)."""
    return parse_ranges(text, option, minimum=0, maximum=SEED_MAX, max_count=MAX_SEEDS)


def optional_seeds(text: str | None, option: str = "--seeds") -> list[int] | None:
    """Seeds that may be left out: None or an empty text is None (each task's protocol seeds), anything else
    parse_seeds. The one reading of a grid file's `seeds` and a queued request's."""
    return parse_seeds(text, option) if text else None


def finite_number(value: object, option: str, *, positive: bool = False, minimum: float | None = None,
                  maximum: float | None = None) -> float:
    """`value` as a finite float (ConfigError otherwise): `positive` refuses 0 and below, `minimum`/`maximum`
    bound it. For options whose argparse type is `float`, which lets `nan` and `inf` through."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"bad {option} value {str(value)[:40]!r}: not a number") from None
    if isinstance(value, bool) or not math.isfinite(number):
        raise ConfigError(f"bad {option} value {str(value)[:40]!r}: give a finite number")
    if positive and number <= 0:
        raise ConfigError(f"bad {option} value {number:g}: must be above 0")
    if minimum is not None and number < minimum:
        raise ConfigError(f"bad {option} value {number:g}: must be at least {minimum:g}")
    if maximum is not None and number > maximum:
        raise ConfigError(f"bad {option} value {number:g}: must be at most {maximum:g}")
    return number


@dataclass(frozen=True)
class Bounds:
    """The values an option may take: from `low` to `high`, `above` excluding `low` itself (a learning rate is
    above 0), `below` excluding `high` (a warmup ratio is below 1). Why every number has one: a finite number can
    still be absurd (`--max-steps 1e30` trains forever, `max_length 1e30` allocates without end), and one table
    of bounds per setting (eval's protocol overrides, pretraining's config) checks the CLI, a grid or config
    file, a queued request and the web form alike."""

    low: float
    high: float
    above: bool = False
    below: bool = False
    integer: bool = False

    def text(self) -> str:
        low = f"above {self.low:g}" if self.above else f"from {self.low:g}"
        return f"{low} {'to below' if self.below else 'to'} {self.high:g}"

    def check(self, value: object, option: str) -> float:
        """`value` as a finite number within the bounds (ConfigError naming `option` and the range otherwise);
        an integer setting refuses fractions."""
        number = finite_number(value, option)
        if (number < self.low or number > self.high or (self.above and number == self.low)
                or (self.below and number == self.high)):
            raise ConfigError(f"bad {option} value {str(value)[:40]!r}: must be {self.text()}")
        if self.integer and not number.is_integer():
            raise ConfigError(f"bad {option} value {str(value)[:40]!r}: must be a whole number {self.text()}")
        return number
