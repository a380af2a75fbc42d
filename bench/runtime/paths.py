"""Paths built from data that biobench did not write itself: a results dataset's rows, a result file's
fields, an archive's member names.

Why one function: such a value becomes a file name (`<cache>/<model slug>/<task>/seed-<n>.json`, an archive
member extracted into a staging folder). A value like `../../x`, `/etc/x` or `a/../../b` would write or read
outside the folder it is meant for. Every component that comes from data must look like the names biobench
itself writes (`store.layout.model_slug`: letters, digits, `.`, `_`, `-`, not starting with a dot), and the joined
path is checked again after resolving (a symlink already on disk cannot lead out either). Anything else is an
`UnsafePathError`, which callers turn into a Problems line or a one-line error.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from biobench.errors import BiobenchError, ConfigError

# What biobench writes as a folder name (model slugs, task ids, results folders): no separators, no leading dot.
HF_DATASETS = "hf://datasets/"  # how a results dataset or a queue on the hub is named everywhere
SAFE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}")
# A Hugging Face hub repository id, the one pattern for models, datasets and Spaces: [owner/]name, each part ASCII
# letters, digits, '.', '_', '-' (at most 96, as the hub allows), the owner starting with a letter or digit, and no
# '..' anywhere (org/.. was once taken for a hub id). A model or a Space always has an owner; a dataset may be a
# bare name (wikitext). Use `is_hub_id`, which says which.
HUB_ID = re.compile(r"(?!.*\.\.)(?:(?P<owner>[A-Za-z0-9][A-Za-z0-9._-]{0,95})/)?[A-Za-z0-9_][A-Za-z0-9._-]{0,95}")
# A language code as task specs write it (fr, en, es).
LANG_CODE = re.compile(r"[a-z]{2,3}")


class UnsafePathError(BiobenchError):
    """A name or path taken from data would lead outside the folder it belongs in."""


def is_hub_id(text: str, *, owner: bool = True) -> bool:
    """`text` is a hub repository id (`HUB_ID`): owner/name, or with `owner=False` also a bare name."""
    found = HUB_ID.fullmatch(text)
    return found is not None and (found["owner"] is not None or not owner)


def safe_name(value: object, what: str = "name") -> str:
    """`value` as a single path component when it looks like a name biobench writes; UnsafePathError otherwise."""
    text = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else None
    if text is None or not SAFE_NAME.fullmatch(text):
        raise UnsafePathError(f"{what} {str(value)[:80]!r} is not a plain name (letters, digits, '.', '_', '-'; "
                              "no '/', no leading '.')")
    return text


# Characters a name or a line of text may not carry (issue 51 §11): C0/C1 controls and DEL (an ESC reached the
# operator's terminal through `eval` and `leaderboard --print`, a newline split the "wrote" line), the line and
# paragraph separators, and every character Unicode says to draw as nothing (Default_Ignorable_Code_Point,
# DerivedCoreProperties.txt): zero-width marks, bidirectional embeddings, overrides and isolates (a model named
# with U+202E showed as a look-alike of another row), the soft hyphen U+00AD, the combining grapheme joiner
# U+034F, the Hangul fillers U+115F/U+1160/U+3164/U+FFA0, variation selectors (U+FE0F ...), tag characters
# (U+E0041 ...) and the BOM: "all-MiniLM-L6-v2" with any of them showed as plain "all-MiniLM-L6-v2" in its own
# row (issue 58 item 2).
UNSAFE_TEXT = re.compile("[\x00-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f"
                         "\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0"
                         "\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")


def check_text(value: object, what: str, limit: int = 200) -> str:
    """`value` as a one-line text of at most `limit` characters without control, bidi or invisible characters
    (UNSAFE_TEXT); ConfigError naming `what`, the first bad character and the fix otherwise. The one check of a
    text a stranger or an operator gives that becomes a name, a file name or a stored line (reject reasons,
    settings)."""
    if not isinstance(value, str):
        raise ConfigError(f"{what}: expected text, not {type(value).__name__}")
    if len(value) > limit:
        raise ConfigError(f"{what}: {len(value):,} characters, over the limit of {limit:,}; give a shorter one")
    bad = UNSAFE_TEXT.search(value)
    if bad:
        code = ord(bad[0])
        kind = ("control or bidirectional" if code < 0xA0 or 0x2028 <= code <= 0x202E or 0x2066 <= code <= 0x2069
                else "invisible")
        raise ConfigError(f"{what}: {display_text(value, 60)!r} holds the {kind} character U+{code:04X} at "
                          f"{bad.start()}; remove it")
    return value


def display_text(value: object, limit: int = 200) -> str:
    """`value` as a text safe to show on one line: every UNSAFE_TEXT character replaced by U+FFFD (visible, so a
    look-alike shows as different) and cut to `limit` characters with an ellipsis. For what is shown rather than
    refused: names already stored in results, archive member names in a message."""
    text = UNSAFE_TEXT.sub("\ufffd", str(value))
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


_ABSOLUTE = re.compile(r"(?<![\w.:/~-])/(?:[^\s/'\"`:;,()<>|]+/)*([^\s/'\"`:;,()<>|]+)/?")


def hide_paths(text: str) -> str:
    """`text` with every absolute path shown as its last component (`/srv/queue/x.json` -> `x.json`): what a
    public page may say about a server's files (docs/RELIABILITY.md: visitors never see a server path)."""
    return _ABSOLUTE.sub(lambda m: m[1], str(text))


def public_model(model: str) -> str:
    """A model as a visitor may see it: hub ids and names as they are, a local folder by its last part."""
    text = str(model)
    return text.rstrip("/").rsplit("/", 1)[-1] if text.startswith(("/", "~", ".")) else text


def inside(root: str | Path, path: str | Path) -> Path:
    """`path` resolved, when it stays inside `root` (also resolved: symlinks followed); UnsafePathError otherwise."""
    base, target = Path(root).resolve(), Path(path).resolve()
    if target != base and base not in target.parents:
        raise UnsafePathError(f"{path} leads outside {root}")
    return target


def safe_join(root: str | Path, *parts: object, what: str = "name") -> Path:
    """root / part / ... where every part is a `safe_name`, re-checked after resolving (`inside`)."""
    path = Path(root).joinpath(*(safe_name(p, what) for p in parts))
    inside(root, path)
    return path


def relative_under(root: str | Path, rel: str, what: str = "archive member") -> Path:
    """`root / rel` when `rel` is a relative POSIX path that stays under `root` written as it is: refused when it
    is absolute, holds a `..` component, a backslash or a NUL (UnsafePathError naming `what`). Links are not
    followed: for a task's split paths, which may be links the user made inside the data folder (what they lead
    to is checked by the reader: a regular file, bounded)."""
    name = PurePosixPath(rel)
    if (not rel or rel.startswith(("/", "\\")) or name.is_absolute() or ".." in name.parts
            or "\\" in rel or "\0" in rel or re.match(r"^[A-Za-z]:", rel)):
        raise UnsafePathError(f"{what} {rel[:120]!r} has an absolute path or a '..' component")
    if UNSAFE_TEXT.search(rel):  # a newline in a member name became a data file name and split the "wrote" line
        raise UnsafePathError(f"{what} {display_text(rel, 120)!r} holds a control or bidirectional character")
    return Path(root).joinpath(*[p for p in name.parts if p not in ("", ".")])


def safe_member(root: str | Path, member: str) -> Path:
    """Where an archive member named `member` (a relative POSIX path) goes under `root`: `relative_under`'s
    checks, and refused when it resolves outside `root` (a link already there cannot lead a write out)."""
    path = relative_under(root, member)
    inside(root, path)
    return path
