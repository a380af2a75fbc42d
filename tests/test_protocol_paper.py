"""The protocol table (`biobench tasks --protocol`, the About tab, docs/PROTOCOL.md) against what the paper states.

The paper's values are transcribed once, here, with their sections (arXiv 2605.12438): a spec or a protocol
constant that drifts from one of them fails this test, and so does docs/PROTOCOL.md's copy of the table when it
differs from the code (regenerate it with `biobench tasks --protocol --markdown`)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from biobench.cli import main
from biobench.protocols import protocol_markdown, protocol_row, sources_markdown
from biobench.tasks.registry import PAPER_TASKS, get_spec, list_specs

DOC = Path(__file__).resolve().parents[1] / "docs" / "PROTOCOL.md"

# Table 8: max length per task (tokens)
TABLE_8_MAX_LENGTH = {"diamed": 2048, "meddialog-fr": 4096, "fracco-30": 4096, "fracco-100": 4096, "cantemist": 4096,
                      "distemist": 4096, "quaero-emea": 1024, "quaero-medline": 1024, "chemprot": 512,
                      "phenotyping": 8192, "cos": 512, "social-history": 512, "deid": 8192, "anatem": 512, "bc5cdr": 512,
                      "jnlpba": 512, "ncbi-disease": 512, "gad": 512, "hoc": 512}
# Appendix H: "NER tasks (EMEA, Medline) ... batch size 16, max length 1024"
APPENDIX_H_NER = {"tasks": ("quaero-emea", "quaero-medline"), "batch_size": 16, "max_length": 1024}
# §3.5 (and Tables 1-2): 9 seeds per French task, 5 per English one; biobench numbers them from 42
SECTION_3_5_SEEDS = {"fr": "42-50 (9)", "en": "42-46 (5)"}
# Table 8 / Appendix E: the headline metric of every task
HEADLINE = "macro-F1"


def paper_differences(rows: list[dict]) -> list[str]:
    """Every value of `rows` that is not the paper's, with the section that states it."""
    found = []
    for row in rows:
        task, values = row["task"], {k: v["value"] for k, v in row["settings"].items()}
        if values["max_length"] != TABLE_8_MAX_LENGTH[task]:
            found.append(f"{task}: max length {values['max_length']}, Table 8 says {TABLE_8_MAX_LENGTH[task]}")
        if task in APPENDIX_H_NER["tasks"]:
            for key in ("batch_size", "max_length"):
                if values[key] != APPENDIX_H_NER[key]:
                    found.append(f"{task}: {key} {values[key]}, Appendix H says {APPENDIX_H_NER[key]}")
        if values["seeds"] != SECTION_3_5_SEEDS[row["lang"]]:
            found.append(f"{task}: seeds {values['seeds']}, §3.5 says {SECTION_3_5_SEEDS[row['lang']]}")
        if values["metric"] != HEADLINE:
            found.append(f"{task}: headline {values['metric']}, Table 8 / Appendix E say {HEADLINE}")
    return found


@pytest.fixture(scope="module")
def paper_rows() -> list[dict]:
    return [protocol_row(spec) for spec in list_specs()]


def test_every_paper_task_has_the_papers_values(paper_rows):
    assert [r["task"] for r in paper_rows] == list(PAPER_TASKS)
    assert paper_differences(paper_rows) == []
    quaero = {r["task"]: r["settings"] for r in paper_rows if r["task"].startswith("quaero")}
    assert {t: s["max_length"]["value"] for t, s in quaero.items()} == {"quaero-emea": 1024, "quaero-medline": 1024}
    assert quaero["quaero-emea"]["max_length"]["source"].startswith("paper arXiv 2605.12438 Appendix H, Table 8")
    assert quaero["quaero-emea"]["sample_unit"]["value"] == "non-blank line of a document"


def test_a_drifting_spec_is_caught(paper_rows):
    """The check can fail: a max length, a batch, a seed set or a metric changed in one row is named."""
    drifted = copy.deepcopy(paper_rows)
    by_task = {r["task"]: r["settings"] for r in drifted}
    by_task["quaero-medline"]["max_length"]["value"] = 256
    by_task["quaero-emea"]["batch_size"]["value"] = 8
    by_task["gad"]["seeds"]["value"] = "42-50 (9)"
    by_task["hoc"]["metric"]["value"] = "micro-F1"
    assert paper_differences(drifted) == [
        "quaero-emea: batch_size 8, Appendix H says 16",
        "quaero-medline: max length 256, Table 8 says 1024",
        "quaero-medline: max_length 256, Appendix H says 1024",
        "gad: seeds 42-50 (9), §3.5 says 42-46 (5)",
        "hoc: headline micro-F1, Table 8 / Appendix E say macro-F1",
    ]
    spec = get_spec("quaero-medline")
    from dataclasses import replace

    assert paper_differences([protocol_row(replace(spec, max_length=256))]) == [
        "quaero-medline: max length 256, Table 8 says 1024", "quaero-medline: max_length 256, Appendix H says 1024"]


def test_docs_table_is_the_generated_one(paper_rows):
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- protocol-table:begin -->\n(.*?)\n<!-- protocol-table:end -->", text, re.S)
    assert block, "docs/PROTOCOL.md lost its protocol-table markers"
    expected = protocol_markdown(paper_rows) + "\n\n" + sources_markdown(paper_rows)
    assert block.group(1) == expected, "docs/PROTOCOL.md's table differs from the code: run `biobench tasks " \
                                       "--protocol --markdown` and paste it between the markers"


def test_about_tab_shows_the_same_rows(paper_rows):
    from biobench.leaderboard.about import about_markdown
    from biobench.service.submission import task_protocols

    text = about_markdown(task_protocols(), queue=True)
    for lang in ("fr", "en"):
        assert protocol_markdown([r for r in paper_rows if r["lang"] == lang]) in text


def test_cli_protocol_listing_text_and_json(capsys):
    assert main(["tasks", "--protocol", "--lang", "fr"]) == 0
    out = capsys.readouterr().out
    assert "quaero-emea (fr, ner)" in out
    assert re.search(r"max length +1024 +\[paper arXiv 2605\.12438 Appendix H, Table 8; tabib "
                     r"configs/base/ner_span_bert\.yaml\]", out)
    assert main(["tasks", "--protocol", "--json", "--all"]) == 0
    rows = {r["task"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["quaero-emea-doc"]["settings"]["sample_unit"]["value"] == "document"
    assert rows["quaero-emea-doc"]["paper_task"] is False
    assert rows["gad"]["settings"]["seeds"] == {"value": "42-46 (5)", "source": "paper arXiv 2605.12438 §3.5 (9 seeds "
                                                "per French task, 5 per English one; Tables 1-2)"}
