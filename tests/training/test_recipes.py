"""Recipes as data (issue 61 part 5): an objective is a closed type stated once (its attention and whether it
masks in recipes.OBJECTIVES, its labels in batches.LABELS), a recipe is a sequence of phases, and the token
counts follow the phases and objectives a run had instead of a fixed list of keys."""

from __future__ import annotations

from typing import get_args

import numpy as np
import pytest
import torch
from biobench.errors import ConfigError
from biobench.lineage import Freeze, Lineage
from biobench.standings.aggregate import lineage_text
from biobench.training import batches, recipes
from biobench.training.batches import BatchBuilder, Masker
from biobench.training.objectives import IGNORE
from biobench.training.packing import PackedCorpus
from biobench.training.recipes import CLM, DECAY, MLM30, OBJECTIVES, Objective, ObjectiveSpec, Phase, Recipe
from biobench.training.trainer import TrainState


def _builder() -> BatchBuilder:
    tokens = np.random.default_rng(0).integers(5, 500, size=4_000).astype(np.uint16)
    offsets = np.array([0, 2_000, 4_000])
    return BatchBuilder(PackedCorpus(tokens, offsets, seq_len=32, pad_id=0, seed=1), Masker([0, 1, 2, 3, 4], 4, 500, 7),
                        batch_size=4, micro=4)


def test_every_objective_has_one_row_and_one_labelling_function():
    assert set(get_args(Objective)) == set(OBJECTIVES) == set(batches.LABELS) == {"clm", "mlm"}
    assert [r.phases[0].causal for r in (recipes.RECIPES["detour"], recipes.RECIPES["mlm"])] == [True, False]
    assert recipes.RECIPES["decoder-control"].needs_causal and not recipes.RECIPES["mlm"].needs_causal


def test_each_objective_labels_its_batch_through_the_table():
    """CLM: the input unchanged, each position labelled with the next token; MLM: the input corrupted where it
    is labelled, the label being the original token."""
    clm, mlm = _builder().step(0, "clm", 0.0)[0], _builder().step(0, "mlm", 0.3)[0]
    original = _builder().packed.batch(list(range(4)))["input_ids"]
    assert torch.equal(clm["input_ids"], original)
    assert torch.equal(clm["labels"][:, :-1], original[:, 1:]) and bool((clm["labels"][:, -1] == IGNORE).all())
    hidden = mlm["labels"] != IGNORE
    assert 0.2 < hidden.float().mean() < 0.4 and torch.equal(mlm["labels"][hidden], original[hidden])
    assert int(mlm["n_labels"]) == int(hidden.sum())


def test_a_new_objective_is_one_row_and_one_function(monkeypatch):
    """What adding an objective takes: its row in OBJECTIVES and its labels in batches.LABELS; the batches, the
    phase's title and the attention follow."""
    def every_token(_builder, batch, _positions, _rate):  # predict each token at its own place, nothing hidden
        batch["labels"] = batch["input_ids"].clone()

    monkeypatch.setitem(OBJECTIVES, "copy", ObjectiveSpec("COPY", causal=False, masks=False))
    monkeypatch.setitem(batches.LABELS, "copy", every_token)
    step = _builder().step(0, "copy", 0.5)[0]  # type: ignore[arg-type]
    assert torch.equal(step["labels"], step["input_ids"]) and int(step["n_labels"]) == step["labels"].numel()
    phase = Phase("phase3", "copy", 0.5, "sqrt-decay")  # type: ignore[arg-type]
    assert (phase.title(), phase.causal) == ("COPY", False)


def test_a_third_phase_is_a_recipe_row():
    """Freezes name phase 3 as `phase3`; --freeze accepts it only for a recipe that has a third phase."""
    three = Recipe("three", "CLM, then MLM 30%, then the decay", (CLM, MLM30, DECAY),
                   (Freeze(0, 1, "clm"), Freeze(2, 3, "phase3")))
    assert [p.title() for p in three.phases] == ["CLM", "MLM 30%", "MLM 15%"]
    assert [three.frozen_layers(i) for i in range(3)] == [[Freeze(0, 1, "clm")], [], [Freeze(2, 3, "phase3")]]
    assert recipes.parse_freeze("2-3@phase3", phases=3) == Freeze(2, 3, "phase3")
    assert recipes.parse_freeze("2-3@phase2") == Freeze(2, 3, "decay")  # what every run has written
    with pytest.raises(ConfigError, match="FIRST-LAST@clm or FIRST-LAST@decay"):
        recipes.get_recipe("detour", ["0-1@phase3"])  # two phases: there is no phase 3


def test_token_counts_follow_the_phases_and_objectives_a_run_had():
    state = TrainState()
    for phase, objective in ((0, "clm"), (0, "clm"), (1, "mlm"), (2, "mlm")):
        state.advance(phase, objective, 100, 4)
    assert state.tokens == {"seen": 400, "phase1": 200, "clm": 200, "phase2": 100, "mlm": 200, "phase3": 100}
    assert TrainState.from_json(state.to_json()).tokens == state.tokens
    assert Lineage("three", tokens=state.tokens).objective_tokens() == {"clm": 200, "mlm": 200}


def test_the_board_reads_the_objectives_from_the_lineage_in_the_order_they_ran():
    """An older file (every key, zeros included) and a decoder-control run (MLM first) read alike."""
    old = {"recipe": "mlm", "tokens": {"phase1": 2_000_000, "phase2": 200_000, "clm": 0, "mlm": 2_200_000,
                                       "seen": 2_200_000}}
    assert lineage_text(old) == "mlm · MLM 2.2M tokens"
    mirror = {"recipe": "decoder-control", "tokens": {"seen": 3_000_000, "phase1": 2_000_000, "mlm": 2_000_000,
                                                      "phase2": 1_000_000, "clm": 1_000_000}}
    assert lineage_text(mirror) == "decoder-control · MLM 2M + CLM 1M tokens"
