"""Which options each task-source format and each fetch converter reads, and the check that a spec names no other.

Why: an option nothing reads (a misspelt `schme` or `stirct`) would silently do nothing, yet it is part of the
spec, of the protocol hash and of every result. Each reader declares the options it reads beside the code that
reads them (`iob.OPTIONS`, `brat.OPTIONS`, `rows.OPTIONS`...); this module assembles them per format, declares
the loader's own (tasks/loading.py) and the fetch entry's (tasks/fetch.py), and `check_source` /
`check_fetch` refuse anything else with the spec file, the key and the nearest valid one. It imports only the
readers, so the registry can run the check when it reads a spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from biobench.errors import ConfigError
from biobench.runtime.keys import check_keys  # re-exported: grid, pretrain and task files import it from here
from biobench.tasks import synthetic
from biobench.tasks.formats import FORMATS
from biobench.tasks.readers import rows

# read by tasks/loading.py for every local source: _read_local (a split file or a random split), _finish (top_k)
LOADER_OPTIONS: tuple[str, ...] = (
    "random_split", "dev_from_train", "top_k", "top_k_scope", "split_file", "split_map", "path", "member_prefix",
)
RANDOM_SPLIT_KEYS: tuple[str, ...] = ("library", "seed", "holdout", "second", "mode", "fractions", "counts")  # loading.random_split
SPLIT_ENTRY_KEYS: tuple[str, ...] = ("path", "member_prefix", "format", "types_from")  # loading._format_entries
TYPES_FROM_KEYS: tuple[str, ...] = ("path", "member_prefix")

# per local format, the options its reader reads (the one table of formats: tasks/formats.py)
FORMAT_OPTIONS: dict[str, tuple[str, ...]] = {name: fmt.options for name, fmt in FORMATS.items()}
LOCAL_FORMATS: tuple[str, ...] = tuple(FORMAT_OPTIONS)
HUB_OPTIONS: tuple[str, ...] = (*rows.OPTIONS, "top_k")  # loading._read_hub -> rows_to_examples, _finish
GENERATED_OPTIONS: tuple[str, ...] = synthetic.OPTIONS

# the fetch entry (tasks/fetch.py): its keys, each file's keys, and per converter the options it reads
# ("expect", the pinned contents, is read for every converter by fetch.expected_contents)
FETCH_KEYS: tuple[str, ...] = ("licence", "gated", "convert", "files", "options", "note", "add")
ADD_KEYS: tuple[str, ...] = ("convert", "options", "note")  # fetch.add: how `data add` installs other files (fetch.add_info)
FETCH_FILE_KEYS: tuple[str, ...] = ("url", "name", "sha256", "sha256_note", "to")
CONVERTER_OPTIONS: dict[str, tuple[str, ...]] = {
    "files": ("expect",),
    "extract": ("members", "expect"),
    "extract_tree": ("patterns", "to", "expect"),
    "repack": ("sets", "expect"),
    "join": ("join", "expect"),
    "meddialog_release": ("splits",),
}


def _entries(split_value: Any) -> list[Any]:
    return split_value if isinstance(split_value, list) else [split_value]


def check_source(raw: Mapping[str, Any], number: int, origin: str) -> None:
    """A source's options (and split entries, random_split and columns) against what its readers read."""
    where = f"{origin}: source #{number}"
    options = raw.get("options") or {}
    kind = raw.get("type")
    if kind == "hub":
        allowed: tuple[str, ...] = HUB_OPTIONS
        if not isinstance(raw.get("dataset"), str) or not raw["dataset"]:
            raise ConfigError(f"{where}: a hub source needs \"dataset\", the Hugging Face dataset id to read")
    elif kind == "generated":
        allowed = GENERATED_OPTIONS
        if not isinstance(raw.get("generator"), str) or not raw["generator"]:  # a name not known: generate_task
            raise ConfigError(f"{where}: a generated source needs \"generator\", one of {', '.join(synthetic.GENERATORS)}")
    else:
        formats = [raw.get("format", "")]
        for value in (raw.get("splits") or {}).values():
            for entry in _entries(value):
                if isinstance(entry, Mapping):
                    check_keys(entry, SPLIT_ENTRY_KEYS, f"{where} split entry {entry.get('path', '')!r}")
                    check_keys(entry.get("types_from") or {}, TYPES_FROM_KEYS, f"{where} split entry types_from")
                    formats.append(entry.get("format", formats[0]))
        check_keys([str(fmt) for fmt in formats], LOCAL_FORMATS, where, what="format")
        allowed = LOADER_OPTIONS + tuple(opt for fmt in formats for opt in FORMAT_OPTIONS[fmt])
    check_keys(options, allowed, f"{where} ({kind}{' ' + raw['format'] if raw.get('format') else ''}) options")
    if isinstance(options.get("random_split"), Mapping):
        check_keys(options["random_split"], RANDOM_SPLIT_KEYS, f"{where} options.random_split")
    if isinstance(options.get("columns"), Mapping):
        check_keys(options["columns"], rows.DEFAULT_COLUMNS, f"{where} options.columns")


def check_fetch(fetch: Mapping[str, Any], origin: str) -> None:
    """A spec's `fetch` entry: its keys, each file's keys, and the options of its converter."""
    check_keys(fetch, FETCH_KEYS, f"{origin}: fetch")
    convert: Any = fetch.get("convert")  # the spec's value, checked against CONVERTER_OPTIONS below
    if convert is not None and convert not in CONVERTER_OPTIONS:
        check_keys([str(convert)], CONVERTER_OPTIONS, f"{origin}: fetch.convert", what="converter")
    for i, entry in enumerate(fetch.get("files") or (), start=1):
        check_keys(entry, FETCH_FILE_KEYS, f"{origin}: fetch.files #{i}")
    check_keys(fetch.get("options") or {}, CONVERTER_OPTIONS.get(convert, ("expect",)),
               f"{origin}: fetch.options (convert {convert!r})")
    add = fetch.get("add")
    if add is not None:
        check_keys(add, ADD_KEYS, f"{origin}: fetch.add")
        if add.get("convert") not in CONVERTER_OPTIONS:
            check_keys([str(add.get("convert"))], CONVERTER_OPTIONS, f"{origin}: fetch.add.convert", what="converter")
        check_keys(add.get("options") or {}, CONVERTER_OPTIONS[add["convert"]],
                   f"{origin}: fetch.add.options (convert {add['convert']!r})")
