"""The About tab: what the board measures, the protocol of each task, how to submit, how to cite the paper.

Why generated from the protocol rather than written as prose: the per-task table is what a submission is
evaluated with (biobench.service.submission.task_protocols resolves it from the task specs and
biobench.protocols, the same resolution `submit` hashes into a request), so it cannot drift from the code.
The reasons for each choice are docs/PROTOCOL.md's; this tab links there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from biobench.leaderboard.tables.escape import md
from biobench.service.submission import protocol_markdown

PAPER = "A Causal Language Modeling Detour Improves Encoder Continued Pretraining"
ARXIV = "2605.12438"
BIBTEX = f"""@article{{biobench_detour_2026,
  title   = {{{PAPER}}},
  journal = {{arXiv preprint arXiv:{ARXIV}}},
  year    = {{2026}},
  url     = {{https://arxiv.org/abs/{ARXIV}}}
}}"""
LANGS = {"fr": "French", "en": "English"}


def protocol_table(rows: Sequence[dict[str, Any]], lang: str) -> str:
    """The Markdown table of one language's tasks (rows from task_protocols): the same table, row for row, as
    docs/PROTOCOL.md's and `biobench tasks --protocol --markdown`."""
    return protocol_markdown([r for r in rows if r.get("lang") == lang])


def task_list(rows: Sequence[dict[str, Any]], lang: str) -> str:
    return "\n".join(f"- **{md(r['task'])}**: {md(r.get('description') or '')}" for r in rows if r.get("lang") == lang)


def about_markdown(rows: Sequence[dict[str, Any]], queue: bool = False) -> str:
    """The whole tab as Markdown: `rows` are task_protocols(); `queue`: whether this app takes requests."""
    langs = [lang for lang in ("fr", "en") if any(r.get("lang") == lang for r in rows)]
    counts = ", ".join(f"{sum(r.get('lang') == lang for r in rows)} {LANGS[lang]}" for lang in langs)
    parts = [
        "## What this board measures",
        f"Biomedical text encoders fine-tuned on the tasks of *{PAPER}* (arXiv [{ARXIV}]"
        f"(https://arxiv.org/abs/{ARXIV})): {counts} tasks — document classification, multi-label coding, "
        "relation extraction and named-entity recognition (nested entities included). Each cell is the test-set "
        "macro-F1 (%) of the checkpoint chosen on the dev set, averaged over the protocol's seeds; **Avg** is the "
        "mean over a language's benchmark tasks (a model missing some gets a partial average, marked `*`, never "
        "ranked against complete ones). Hover a cell for its seeds, standard deviation and 95% confidence "
        "interval. A shaded cell is in the task's top significance group: not significantly worse than the best "
        "measured model (paired bootstrap over test examples and seeds, p ≥ 0.05).",
        "**Measured** rows were fine-tuned by `biobench eval` and published here; **reported** rows (italic) are "
        "the paper's published numbers (Tables 1-2), shown for reference. *vs paper* says, task by task, whether "
        "a measured model reproduces its reported number.",
        "## The protocol, per task",
        "Every run records its resolved protocol, whose hash is part of the run's key: results made with other "
        "settings (a smoke run with fewer epochs or examples) are never merged with protocol runs. The reasons "
        "for each choice, with the harness files they come from, are in the repository's `docs/PROTOCOL.md`. "
        "All runs: AdamW (no weight decay on biases and norms), linear decay after the warmup, best dev checkpoint "
        "used for test. Where each value comes from (the paper's section or the harness file) is "
        "`biobench tasks --protocol`.",
    ]
    for lang in langs:
        parts += [f"### {LANGS[lang]}", protocol_table(rows, lang), "", task_list(rows, lang)]
    parts += [
        "## How to submit a model",
        ("Use the **Submit** tab (a hub model id; its revision is pinned when the request is written), or run "
         if queue else "This board takes no requests itself; where its request queue is reachable, run ")
        + "`biobench submit ORG/MODEL --lang fr --queue QUEUE`. A worker (`biobench worker --queue QUEUE`) "
        "fine-tunes the model with the protocol above and publishes the results; the **Queue** tab shows each "
        "request's status, times and score. You can also evaluate locally (`biobench eval --model ORG/MODEL "
        "--lang fr`) and publish the results folder with `biobench results push`.",
        "## Citation",
        f"If you use these results or the benchmark, please cite the paper (arXiv {ARXIV}):",
        f"```bibtex\n{BIBTEX}\n```",
    ]
    return "\n\n".join(parts)
