"""Rank intervals and incremental significance (issue 42): on a constructed board a far-ahead model ranks
"1-1" and two identical models get the same interval, on every task and on the language average; a new model
recomputes only its own replicate scores, and the result equals a full recompute to the last bit; the export
carries the intervals."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from biobench.perf import leaderboard_scale as scale
from biobench.standings import significance
from biobench.standings.aggregate import build_board
from biobench.standings.cache import cached_groups
from biobench.standings.significance import compute_groups


def _copy_model(results: Path, source: str, slug: str) -> None:
    """A second results folder of `source`'s predictions under another slug (its own model)."""
    shutil.copytree(results / source, results / slug)
    for path in (results / slug).rglob("seed-*.json"):
        data = json.loads(path.read_text())
        data["model"].update(slug=slug, name=slug, id=f"synthetic/{slug}")
        path.write_text(json.dumps(data))


def _perfect(results: Path, slug: str) -> None:
    """`slug` predicts every gold label: far ahead of the others (90% accuracy at best) on every task."""
    for path in (results / slug).rglob("seed-*.predictions.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({**r, "pred": r["gold"]}) + "\n" for r in rows))
        result = path.with_name(path.name.replace(".predictions.jsonl", ".json"))
        data = json.loads(result.read_text())
        data["metrics"]["test"]["macro_f1"] = 1.0
        result.write_text(json.dumps(data))


@pytest.fixture
def board_folder(tmp_path) -> Path:
    results = tmp_path / "results"
    scale.generate(results, 4, scale.benchmark_tasks(8), 3, 60)  # the 8 French tasks: an average to rank
    _perfect(results, "synthetic__model-000")
    _copy_model(results, "synthetic__model-002", "synthetic__twin-002")
    return results


def test_a_far_ahead_model_ranks_1_1_and_identical_models_share_their_interval(board_folder):
    board = build_board([board_folder], significance=False)
    compute_groups(board, n_boot=200)
    tasks = scale.benchmark_tasks(8)
    assert set(board.ranks) == {("fr", t) for _, t in tasks} | {("fr", None)}
    for key, ranks in board.ranks.items():
        assert str(ranks["synthetic__model-000"]) == "1-1", key  # perfect, against 77% accuracy at best
        twin, original = ranks["synthetic__twin-002"], ranks["synthetic__model-002"]
        assert twin == original, key  # same predictions: the same rank and interval, in every replicate
        assert all(1 <= r.low <= r.rank <= r.high <= 5 for r in ranks.values()), key
    worst = board.ranks[("fr", None)]["synthetic__model-003"]
    assert worst.rank == 5 and worst.high == 5


def test_a_new_model_recomputes_only_its_own_scores_and_equals_a_full_recompute(board_folder, tmp_path,
                                                                                 monkeypatch):
    cache = tmp_path / "cache"
    calls: list[int] = []
    real = significance.replicate_scores
    monkeypatch.setattr(significance, "replicate_scores", lambda m, counts, *a: calls.append(len(counts)) or real(
        m, counts, *a))
    cached_groups(build_board([board_folder], significance=False), n_boot=200, cache_dir=cache)
    assert calls == [5] * 8  # cold: every model of every task

    _copy_model(board_folder, "synthetic__model-003", "synthetic__new-model")
    calls.clear()
    grown = build_board([board_folder], significance=False)
    assert cached_groups(grown, n_boot=200, cache_dir=cache) == {"tasks": 8, "cached": 0, "computed": 8}
    assert calls == [1] * 8  # only the new model's replicate scores, on each task

    full = build_board([board_folder], significance=False)
    compute_groups(full, n_boot=200)
    assert grown.groups == full.groups and grown.ranks == full.ranks  # dataclass equality: floats to the last bit
    assert all(grown.groups[k].vs_best[m] == full.groups[k].vs_best[m] for k in full.groups
               for m in full.groups[k].vs_best)
    assert "synthetic__new-model" in grown.ranks[("fr", None)]


def test_a_hostile_replicate_cache_is_a_miss(board_folder, tmp_path):
    cache = tmp_path / "cache"
    reference = build_board([board_folder], significance=False)
    compute_groups(reference, n_boot=100)
    cached_groups(build_board([board_folder], significance=False), n_boot=100, cache_dir=cache)
    scores = sorted((cache / "replicates").glob("scores-*.npy"))
    assert scores
    import numpy as np

    np.save(scores[0], np.full((101, 3), np.nan))  # right shape, not finite
    np.save(scores[1], np.zeros((7, 7)))  # another shape
    scores[2].write_bytes(b"\x93NUMPY\x01\x00" + b"{'descr': '|O'}")  # an object array header: never unpickled
    for path in cache.glob("groups-*.json"):
        path.unlink()
    again = build_board([board_folder], significance=False)
    cached_groups(again, n_boot=100, cache_dir=cache)
    assert again.groups == reference.groups and again.ranks == reference.ranks


def test_the_export_carries_the_rank_intervals(board_folder, tmp_path):
    from biobench.leaderboard.tables.export import write_export
    from biobench.leaderboard.tables.frames import language_frame
    from biobench.leaderboard.tables.html import render_html

    board = build_board([board_folder], significance=True, n_boot=100, reference=False)
    rows = json.loads(write_export(board, tmp_path / "board.json").read_text())
    first = next(r for r in rows if r["model"] == "model-000")
    assert first["avg_rank"] == "1-1" and first["diamed_rank"] == "1-1"
    assert language_frame(board, "fr").set_index("model").loc["model-000", "avg_rank"] == "1-1"
    assert ">1-1<" in render_html(board, "fr")


def test_counts_are_kept_in_float32_only_where_it_holds_them_exactly():
    import numpy as np
    from biobench.standings.significance import _compact

    whole = np.array([[[0.0, 1.0, 3.0], [2.0, 0.0, 1.0]]])
    assert _compact(whole).dtype == np.float32 and np.array_equal(_compact(whole), whole)
    assert _compact(np.array([0.1, 1.0])).dtype == np.float64  # 0.1 is not a float32 value: kept as it is
    assert _compact(np.array([2.0**25 + 1])).dtype == np.float64
