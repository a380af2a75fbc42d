"""biobench's length-grouped batch order is the Hugging Face Trainer's (`group_by_length`), index for index,
and the random streams helper restores every generator it saved."""

from __future__ import annotations

import random

import pytest
import torch
from biobench.runtime.batching import LengthGroupedSampler, length_grouped_order
from biobench.runtime.randomness import rng_preserved, rng_state, set_rng_state


@pytest.mark.canary
@pytest.mark.parametrize("n,batch,seed", [(1, 4, 0), (7, 16, 1), (64, 4, 2), (1000, 16, 42), (5000, 8, 7)])
def test_the_order_equals_transformers(n, batch, seed):
    """If this fails, transformers changed its sampler: biobench keeps the order its results were made with."""
    from transformers.trainer_pt_utils import get_length_grouped_indices

    lengths = [random.Random(seed + i).randint(1, 300) for i in range(n)]
    ours = length_grouped_order(lengths, batch, torch.Generator().manual_seed(seed))
    theirs = get_length_grouped_indices(lengths, batch, generator=torch.Generator().manual_seed(seed))
    assert ours == theirs


def test_the_order_is_a_permutation_grouped_by_length_with_the_longest_first():
    lengths = [random.Random(i).randint(1, 500) for i in range(640)]
    order = length_grouped_order(lengths, 4, torch.Generator().manual_seed(3))
    assert sorted(order) == list(range(640)) and lengths[order[0]] == max(lengths)
    # mega-batches of 40 batches (640 // 16): within each, lengths only decrease (but for the swapped first)
    mega = 160
    for start in range(mega, 640, mega):
        chunk = [lengths[i] for i in order[start:start + mega]]
        assert chunk[1:] == sorted(chunk[1:], reverse=True)


def test_the_sampler_draws_a_new_order_each_epoch_from_its_generator():
    sampler = LengthGroupedSampler(2, [3, 1, 4, 1, 5, 9, 2, 6], torch.Generator().manual_seed(0))
    first, second = list(sampler), list(sampler)
    assert len(sampler) == 8 and sorted(first) == sorted(second) == list(range(8)) and first != second


def test_rng_preserved_leaves_every_stream_where_it_was():
    torch.manual_seed(5)
    random.seed(5)
    torch_before, python_before = torch.get_rng_state().clone(), random.getstate()
    with rng_preserved():
        torch.rand(3)
        random.random()
    assert torch.equal(torch.get_rng_state(), torch_before) and random.getstate() == python_before


def test_a_saved_state_replays_the_same_draws_and_an_old_one_without_python_is_accepted():
    saved = rng_state()
    draws = (torch.rand(2).tolist(), random.random())
    set_rng_state(saved)
    assert (torch.rand(2).tolist(), random.random()) == draws
    python_now = random.getstate()
    set_rng_state({"torch": saved["torch"], "cuda": None})  # a checkpoint written before Python's stream was saved
    assert random.getstate() == python_now and torch.rand(2).tolist() == draws[0]
