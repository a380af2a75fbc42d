"""The options of each `biobench analyze` kind, declared once: the command's parser is built from them
(bench/commands/analyze.py) and a study's `[[analysis]]` table is checked against them (bench/api/study.py), so
the two cannot drift. Torch-free: `biobench --help` imports it.

An option's `role` says how a study reads its value: a `model` (a run reference, `analysis:NAME` of a
transplant, a folder beside the study file, an alias or hub id), a `run` (a run reference whose whole run folder
is read), a `path` (relative to the study file, or `analysis:NAME`: another analysis' folder), `texts` (task ids,
or text files beside the study file), or `plain` (passed as written). `decided`: the study sets it itself (where
the output goes, the device), so a table may not.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Literal

OptionType = Literal["int", "float", "text", "flag"]
Role = Literal["plain", "model", "run", "path", "texts"]
AnalysisKind = Literal["cka", "cka-trajectory", "needle-generate", "needle", "transplant", "probe"]


@dataclass(frozen=True)
class Option:
    flag: str  # "--max-length"
    type: OptionType
    help: str
    required: bool = False
    default: Any = None
    nargs: int | Literal["+"] | None = None
    metavar: str | tuple[str, ...] | None = None
    choices: tuple[str, ...] | None = None
    dest: str | None = None  # the attribute name when it is not the flag's (`--from` -> source)
    role: Role = "plain"
    decided: bool = False  # set by a study (out, results, device): a study table may not give it
    hidden: bool = False  # accepted by the parser, not shown (a refused alias that explains itself)
    group: str | None = None  # options of one group exclude each other
    repeat: bool = False  # action="append": the flag repeated per value

    @property
    def key(self) -> str:
        """The option as a study table writes it: `max_length` for `--max-length`."""
        return self.flag[2:].replace("-", "_")


@dataclass(frozen=True)
class AnalysisSpec:
    kind: AnalysisKind
    words: tuple[str, ...]  # the `biobench analyze` words
    help: str
    description: str
    options: tuple[Option, ...]
    # the file whose presence means done ('' for a probe: done when each seed has its result file)
    done_file: str
    device: bool = True  # has --device (a transplant only copies tensors)

    def option(self, key: str) -> Option | None:
        return next((o for o in self.options if o.key == key), None)


def _device() -> Option:
    return Option("--device", "text", "cpu, cuda, cuda:1 (default: cuda when available)", decided=True)


_TEXTS = Option("--texts", "text", "one or more sources, mixed in equal shares: text files/folders (.jsonl[.gz] "
                "'text' records, .txt lines) or task ids (all their splits). Paper: French DiaMED + FrACCO, English "
                "PubMed abstracts", required=True, nargs="+", metavar="PATH|TASK", role="texts")
_N = Option("--n", "int", "texts per sample seed, all sources together (default 500)", default=500)
_SAMPLE_SEEDS = Option("--sample-seeds", "text", "seeds of the text samples (default 42,43,44)", default="42,43,44")
_MAX_LENGTH = Option("--max-length", "int", "tokens per text (default 512)", default=512)
_BATCH = Option("--batch-size", "int", "texts per forward pass", default=8)
_DATA_DIR = Option("--data-dir", "text", "task data folder when --texts has task ids", metavar="DIR", role="path")
_EMBEDDINGS = Option("--include-embeddings", "flag", "average over the embedding output too (default: transformer "
                     "layers only)")

CKA = AnalysisSpec(
    "cka", ("analyze", "cka"), "per-layer linear CKA divergence between two models (+ seed-noise ratio)", "",
    (Option("--models", "text", "A (e.g. the CLM-detour model) and the reference B (e.g. MLM seed 1)", required=True,
            nargs=2, metavar=("A", "B"), role="model"),
     Option("--noise", "text", "a second seed of B (e.g. MLM seed 2): adds r_l = div(A,B)/div(N,B)", metavar="N",
            role="model"),
     _TEXTS, _N, _EMBEDDINGS, _SAMPLE_SEEDS, _MAX_LENGTH, _BATCH, _DATA_DIR,
     Option("--align-relative", "flag", "for models of different depth: pair layers by relative depth instead of "
            "failing"),
     _device(),
     Option("--out", "text", "writes DIR/cka.json and DIR/cka.png", required=True, metavar="DIR", decided=True)),
    "cka.json")

CKA_TRAJECTORY = AnalysisSpec(
    "cka-trajectory", ("analyze", "cka-trajectory"), "CKA divergence vs the start model for every checkpoint of a run",
    "Paper Figure 3a: for every step-*/ checkpoint of a `biobench pretrain` run (and phase1/, final/), the mean CKA "
    "divergence over transformer layers from the start model, with its 95% CI over sample seeds. Writes "
    "DIR/cka_trajectory.json and .png (the leaderboard's Plots tab shows them).",
    (Option("--run", "text", "a `biobench pretrain --out` folder", required=True, metavar="DIR", role="run"),
     Option("--start", "text", "the start model (default: base_model in the run's metadata)", metavar="MODEL",
            role="model"),
     Option("--texts", "text", "as for `analyze cka`", required=True, nargs="+", metavar="PATH|TASK", role="texts"),
     _N, _SAMPLE_SEEDS, _MAX_LENGTH, _BATCH, _DATA_DIR, _EMBEDDINGS, _device(),
     Option("--out", "text", "default: the run folder", metavar="DIR", decided=True)),
    "cka_trajectory.json")

TRANSPLANT = AnalysisSpec(
    "transplant", ("analyze", "transplant"), "copy a layer range (or only attention / MLP) of model A into model B",
    "Copy the parameters of a layer range (all, or only attention / MLP) of model A into model B and save the "
    "result as a new model folder, to evaluate like any other.",
    (Option("--from", "text", "model the parameters come from", required=True, metavar="A", dest="source",
            role="model"),
     Option("--into", "text", "model that receives them (its head and tokenizer are kept)", required=True,
            metavar="B", dest="target", role="model"),
     Option("--layers", "text", "transformer layers, 0-based: 0-7, 8-14, 0-3,8", required=True),
     Option("--component", "text", "all | attention (with its norm) | mlp (with its norm); default all",
            default="all"),
     Option("--out", "text", "new model folder (+ transplant.json)", required=True, metavar="DIR", decided=True)),
    # transplant.json is the last file analysis/transplant.py writes (after the weights and the tokenizer), so its
    # presence means a whole model folder
    "transplant.json", device=False)

PROBE = AnalysisSpec(
    "probe", ("analyze", "probe"), "logistic-regression probe on frozen features, macro-F1 per seed",
    "Fit a logistic-regression probe on a frozen model's pooled features of one layer, once per seed, and store "
    "macro-F1 per seed as results (a variant of the model).",
    (Option("--model", "text", "alias, hub id or local model folder (as for `biobench eval`)", required=True,
            role="model"),
     Option("--task", "text", "a classification, relation or multilabel task id", required=True),
     Option("--seeds", "text", "probe seeds (LR random_state + train subsample); default 42-44", default="42-44"),
     Option("--pooling", "text", "mean of the token states, or the first ([CLS]) token's state", default="mean",
            choices=("mean", "cls")),
     Option("--layer", "int", "hidden state index (0 = embeddings, -1 = last)", default=-1),
     Option("--max-length", "int", "default: the task's max length, capped by the model"),
     Option("--limit-train", "int", "subsample this many training examples per seed"),
     Option("--batch-size", "int", "texts per forward pass when extracting features", default=8),
     Option("--results", "text", "results store (default results/)", default="results", metavar="DIR",
            decided=True),
     Option("--overwrite", "flag", "redo seeds that already have a result"),
     # as tasks.registry.add_task_arguments declares them for `biobench tasks` and `eval`
     Option("--data-dir", "text", "folder holding task data in the documented layout (default: $BIOBENCH_DATA)",
            metavar="DIR", role="path"),
     Option("--task-file", "text", "your own task spec (.json/.toml, same fields as the built-in specs); repeatable",
            metavar="SPEC", role="path", repeat=True, default=[]),
     _device()),
    "")

NEEDLE_GENERATE = AnalysisSpec(
    "needle-generate", ("analyze", "needle", "generate"), "write DIR/needle.jsonl from a French biomedical text folder",
    "Appendix I's needle set. Lengths count the evaluated model's tokens (pass it as --tokenizer) and include the "
    "query and special tokens, so an L-token example fits an L-token context untruncated; --length-unit words "
    "counts whitespace words instead. Size: --examples (probe inputs, default 1500 = the paper's '1500 balanced "
    "positive/negative pairs' read as 1500 (query, document) inputs) or --pairs (positive/negative pairs, each two "
    "examples).",
    (Option("--haystacks", "text", ".jsonl[.gz] records with 'text', or .txt files", required=True, metavar="DIR",
            role="path"),
     Option("--out", "text", "folder for needle.jsonl", required=True, metavar="DIR", decided=True),
     Option("--examples", "int", "probe inputs, half positive, half negative (even; default 1500)", group="size"),
     Option("--pairs", "int", "positive/negative pairs (same haystack and query, one fact apart); examples = 2 x "
            "pairs", group="size"),
     Option("--n", "int", "ambiguous: refused with a hint", hidden=True),
     Option("--lengths", "text", "haystack lengths, comma-separated", default="512,1024,2048,4096,8192"),
     Option("--seed", "int", "seed of the haystack, fact and position draws", default=0),
     Option("--tokenizer", "text", "the evaluated model (or a tokenizer folder): lengths count its tokens, query and "
            "special tokens included (required unless --length-unit words)", metavar="M", role="model"),
     Option("--length-unit", "text", "tokens of --tokenizer (default) or whitespace words (fewer than subword "
            "tokens)", default="tokens", choices=("tokens", "words"))),
    "needle.jsonl", device=False)

NEEDLE = AnalysisSpec(
    "needle", ("analyze", "needle", "run"), "frozen encoder + MLP probe on CLS; accuracy by length and position",
    "Encode the needle set once with the frozen model, train an MLP probe on the [CLS] features per seed and report "
    "accuracy by haystack length and needle position.",
    (Option("--model", "text", "alias, hub id or local model folder (as for `biobench eval`)", required=True,
            role="model"),
     Option("--data", "text", "folder holding needle.jsonl", required=True, metavar="DIR", role="path"),
     Option("--out", "text", "default: DATA/runs/<model-slug>", metavar="DIR", decided=True),
     Option("--seeds", "text", "probe seeds (default 42)", default="42"),
     Option("--epochs", "int", "probe training epochs", default=3),
     Option("--lr", "float", "probe learning rate", default=2e-5),
     Option("--batch-size", "int", "probe batch size (default 4)", default=4),
     Option("--encode-batch-size", "int", "texts per forward pass of the frozen encoder", default=8),
     Option("--max-length", "int", "default: the model's context"),
     Option("--lengths", "text", "only these haystack lengths (e.g. 512,1024)"),
     _device()),
    "needle_results.json")

ANALYSES: dict[str, AnalysisSpec] = {spec.kind: spec for spec in
                                     (CKA, CKA_TRAJECTORY, NEEDLE_GENERATE, NEEDLE, TRANSPLANT, PROBE)}


def add_options(parser: argparse.ArgumentParser, spec: AnalysisSpec) -> None:
    """The parser's arguments, from the declaration."""
    groups: dict[str, Any] = {}
    for option in spec.options:
        target = parser
        if option.group is not None:
            if option.group not in groups:
                groups[option.group] = parser.add_mutually_exclusive_group()
            target = groups[option.group]
        kwargs: dict[str, Any] = {"help": argparse.SUPPRESS if option.hidden else option.help}
        if option.type == "flag":
            kwargs["action"] = "store_true"
        else:
            if option.type != "text":
                kwargs["type"] = int if option.type == "int" else float
            if option.repeat:
                kwargs["action"] = "append"
            for name in ("default", "nargs", "metavar", "choices", "dest"):
                if getattr(option, name) is not None:
                    kwargs[name] = getattr(option, name)
            if option.required:
                kwargs["required"] = True
        target.add_argument(option.flag, **kwargs)
