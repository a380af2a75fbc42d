"""One normalised example schema per task kind — the contract between `tasks` and everything downstream.

Readers turn every source format into these; heads, metrics and the results store only ever see these.
All offsets are character offsets into `text`, end-exclusive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

TaskKind = Literal["classification", "multilabel", "ner", "relation"]
TASK_KINDS: tuple[str, ...] = get_args(TaskKind)
# the fine-tuning protocols a spec may name; what each one means (seeds, knobs, heads) is biobench.protocols
ProtocolName = Literal["fr", "en"]
PROTOCOL_NAMES: tuple[str, ...] = get_args(ProtocolName)


@dataclass(frozen=True)
class Entity:
    """An entity mention. `start`/`end` span the whole mention; a discontinuous mention lists its
    `fragments` (each (start, end)), whose hull is (start, end). `code` carries a normalisation code
    (e.g. a BRAT AnnotatorNotes CUI or ICD-O code) when the source has one."""

    start: int
    end: int
    label: str
    fragments: tuple[tuple[int, int], ...] = ()
    code: str | None = None

    @property
    def is_discontinuous(self) -> bool:
        return len(self.fragments) > 1

    def key(self) -> tuple[int, int, str]:
        """Identity used by exact-match span F1."""
        return (self.start, self.end, self.label)


@dataclass(frozen=True)
class ClassificationExample:
    id: str
    text: str
    label: str


@dataclass(frozen=True)
class MultilabelExample:
    id: str
    text: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class NerExample:
    """A sentence or document with its entities. `tokens` holds (start, end) character offsets of the
    source's own tokens when the source is token-level (IOB); None for raw documents (BRAT)."""

    id: str
    text: str
    entities: tuple[Entity, ...]
    tokens: tuple[tuple[int, int], ...] | None = None


@dataclass(frozen=True)
class RelationExample:
    """Text with the two entities already marked in it (e.g. `<< >>` / `[[ ]]` or `@GENE$`)."""

    id: str
    text: str
    label: str


Example = ClassificationExample | MultilabelExample | NerExample | RelationExample


@dataclass
class TaskData:
    """A loaded task: its examples per split, the label inventory, where it came from, and a checksum of
    the normalised content (so a result can say exactly which data it was computed on)."""

    task_id: str
    kind: TaskKind
    splits: dict[str, list[Example]] = field(default_factory=dict)  # "train" | "dev" | "test" -> examples
    labels: list[str] = field(default_factory=list)
    source: str = ""
    checksum: str = ""
    data_version: str = ""  # the source's `version` (e.g. "blue-reconstructed"), recorded in every result
