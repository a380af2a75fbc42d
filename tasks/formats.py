"""The local task-source formats: one table, format name -> (the reader of one split entry, the options it reads).

Why one table: the loader (tasks/loading.py) dispatches on it and the spec check (tasks/options.py) reads its
option lists from it, so a format is added in one place, and the set of formats a spec may name is the set the
loader can read. Each reader gets the split entry (`EntryRead`) and returns normalised examples
(biobench.tasks.schema). Imports only the readers and the schema, so the registry's spec check can use it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biobench.errors import DataError
from biobench.runtime.paths import UnsafePathError, relative_under
from biobench.tasks.readers import brat, clinical, hf, iob, rows, tabular
from biobench.tasks.schema import MultilabelExample

TABLE_FORMATS = ("tsv", "csv", "jsonl", "json")


def resolve_path(base: Path, rel: str) -> Path:
    """`base/rel`, accepting the uncompressed file when the spec names `x.gz` (gzip is optional).

    The one place a spec's local path becomes a file, so the one place it is contained: a path in a spec (a
    built-in one, or a `--task-file` someone shared) stays inside the task's data folder (`base`: the data dir,
    or the spec file's folder). `../../../../dev/zero` or `/etc/passwd` as a split is one DataError here, not a
    read outside. The user's own paths come from the command line (`--data-dir`, `--task-file`), never a spec."""
    try:
        path = relative_under(base, str(rel), "path")
    except UnsafePathError as err:
        raise DataError(f"task spec: {err}; a spec's local paths stay inside its data folder {base} (move the file "
                        "there, or point --data-dir / the --task-file's folder at where the data is)") from None
    if not path.exists() and rel.endswith(".gz") and (base / rel[:-3]).exists():
        return base / rel[:-3]
    return path


@dataclass(frozen=True)
class EntryRead:
    """One split entry to read: its file, the source's options, and what error messages and ids need."""

    task_id: str
    kind: str
    split: str
    path: Path
    base: Path  # what the source's other paths (notes, masked, types_from) are relative to
    member_prefix: str
    types_from: Mapping[str, Any] | None
    options: Mapping[str, Any]
    read_before: int  # examples already read for this split (iob ids stay unique across entries)


def _iob(entry: EntryRead) -> list:
    opts = entry.options
    if entry.types_from:  # untyped IOB tokens typed from a standoff copy of the same corpus (jnlpba)
        groups = iob.read_iob_documents(entry.path, scheme=opts.get("scheme", "iob2"), strict=opts.get("strict", True),
                                        default_type="untyped", id_prefix=entry.split)
        standoff = brat.read_brat(resolve_path(entry.base, entry.types_from["path"]),
                                  member_prefix=entry.types_from.get("member_prefix", ""))
        return brat.type_from_standoff(groups, standoff, str(entry.path))
    return iob.read_iob(entry.path, scheme=opts.get("scheme", "iob2"), strict=opts.get("strict", True),
                        default_type=opts.get("default_type"),
                        id_prefix=f"{entry.split}{entry.read_before and '-' + str(entry.read_before) or ''}")


def _brat_documents(entry: EntryRead) -> tuple[brat.BratDocument, ...]:
    opts = entry.options
    return brat.read_brat(entry.path, member_prefix=entry.member_prefix,
                          note_type=opts.get("note_type", "AnnotatorNotes"),
                          missing_ann=opts.get("missing_ann", "error"), verify_spans=opts.get("verify_spans", True))


def _brat(entry: EntryRead) -> list:
    opts = entry.options
    return brat.ner_examples(_brat_documents(entry), opts.get("entity_labels"), opts.get("sample_unit", "document"))


def _brat_codes(entry: EntryRead) -> list:
    opts = entry.options
    found = [MultilabelExample(d.id, d.text, brat.document_codes(d, opts.get("entity_labels"), opts.get("code_pattern"),
                                                                 opts.get("code_unit", "token")))
             for d in _brat_documents(entry)]
    if not any(ex.labels for ex in found):
        note = opts.get("note_type", "AnnotatorNotes")
        on = f" on {'/'.join(opts['entity_labels'])} mentions" if opts.get("entity_labels") else ""
        raise DataError(
            f"{entry.path}: none of its {len(found)} documents has a {note!r} note{on} (`#n<TAB>{note} Tk<TAB>code`), "
            f"so task '{entry.task_id}' has no labels; point the spec at the annotated release (for FRACCO: "
            "brat_raw, not brat_processed, which drops the expression_CIM mentions and their codes)")
    return found


def _rows(found: list, entry: EntryRead) -> list:
    return rows.rows_to_examples(found, entry.kind, entry.split, entry.options)


def _table(fmt: str) -> Callable[[EntryRead], list]:
    """The reader of one table format (tsv, csv, jsonl, json)."""
    return lambda e: _rows(tabular.read_table(e.path, fmt, e.options), e)


@dataclass(frozen=True)
class Format:
    read: Callable[[EntryRead], list]
    options: tuple[str, ...]  # the source options its reader reads (tasks/options.py refuses any other)
    unit: str = "row"  # what one example is (the protocol table's "sample unit")


FORMATS: dict[str, Format] = {
    "iob": Format(_iob, iob.OPTIONS, "sentence"),
    "brat": Format(_brat, brat.OPTIONS, "document"),  # or a line: sample_unit_of
    "brat_codes": Format(_brat_codes, brat.CODE_OPTIONS, "document"),
    "hf": Format(lambda e: _rows(hf.dataset_rows(hf.load_local(e.path), str(e.path)), e), rows.OPTIONS, "parquet row"),
    "phenotype_csv": Format(lambda e: _rows(clinical.phenotype_rows(e.path, resolve_path(e.base, e.options["notes"])), e),
                            clinical.PHENOTYPE_OPTIONS + rows.OPTIONS, "note"),
    "physionet_deid": Format(lambda e: _rows(clinical.deid_rows(e.path, resolve_path(e.base, e.options["masked"])), e),
                             clinical.DEID_OPTIONS + rows.OPTIONS, "note"),
    "cos_snippets": Format(lambda e: clinical.cos_snippet_examples(e.path), (), "snippet"),
    "social_history": Format(lambda e: clinical.social_history_examples(e.path), (), "document"),
    **{fmt: Format(_table(fmt), tabular.DELIMITED_OPTIONS + rows.OPTIONS) for fmt in ("tsv", "csv")},
    **{fmt: Format(_table(fmt), rows.OPTIONS, "record" if fmt == "json" else "line")
       for fmt in ("jsonl", "json")},
}


def sample_unit_of(source: Any) -> str:
    """What one example of a task source is, in words (a tasks.registry.Source): its format's unit, a BRAT
    source's `sample_unit` option ("non-blank line"), rows merged by `group_pattern`, a hub source's row."""
    options = source.options or {}
    if source.type == "generated":
        return "generated example"
    if options.get("group_pattern"):
        return "rows grouped by id (group_pattern)"
    if source.type == "hub":
        return "hub row"
    if source.format == "brat" and options.get("sample_unit") == "line":
        return "non-blank line of a document"
    return FORMATS[source.format].unit
