"""The decoder control of Table 4 (Gemma-3) and the seed-noise control (--data-seed, step digests).

Leak tests: in the bidirectional phase a change at positions > t changes the output at t (on global AND
sliding-window layers); in the causal phase it never does, on sdpa and eager, with and without padding, for
sequences longer and shorter than the sliding window (the short case is where transformers skips the mask and
reads the attention modules' `is_causal`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from biobench.errors import ConfigError
from biobench.training import checkpoint
from biobench.training.batches import mlm_mask
from biobench.training.causal import bidirectional_attention, phase_attention, set_bidirectional
from biobench.training.loading import add_mask_token
from biobench.training.objectives import LMLoss
from biobench.training.presets import build_gemma3_causal_lm, train_tokenizer
from biobench.training.trainer import PretrainConfig, Trainer, train
from conftest import TINY_TEXTS

WINDOW = 16


@pytest.fixture(scope="module")
def decoder_tokenizer():
    return train_tokenizer(TINY_TEXTS, vocab_size=400, decoder=True)


def _decoder(tokenizer, impl: str, bidirectional_at_init: bool = False):
    model = build_gemma3_causal_lm(tokenizer, seed=1, sliding_window=WINDOW,
                                   use_bidirectional_attention=bidirectional_at_init)
    model.set_attn_implementation(impl)
    return model.eval()


def _pair(vocab: int, length: int, t: int, pad: bool):
    g = torch.Generator().manual_seed(length)
    ids = torch.randint(4, vocab, (2, length), generator=g)
    changed = ids.clone()
    changed[:, t + 1:] = torch.randint(4, vocab, (2, length - t - 1), generator=g)
    mask = torch.ones(2, length, dtype=torch.long)
    if pad:
        mask[1, length - 3:] = 0
    return ids, changed, mask


def _future_effect(model, length: int, t: int, pad: bool, layer: int | None = None) -> float:
    """Max change at positions <= t (logits, or one layer's hidden states) when positions > t change."""
    ids, changed, mask = _pair(model.config.vocab_size, length, t, pad)
    with torch.no_grad():
        if layer is None:
            a, b = model(ids, attention_mask=mask).logits, model(changed, attention_mask=mask).logits
        else:
            a = model(ids, attention_mask=mask, output_hidden_states=True).hidden_states[layer + 1]
            b = model(changed, attention_mask=mask, output_hidden_states=True).hidden_states[layer + 1]
    return float((a - b)[:, : t + 1].abs().max())


CASES = [(3 * WINDOW, WINDOW + 4, False), (3 * WINDOW, WINDOW + 4, True), (WINDOW - 4, 5, False),
         (WINDOW - 4, 5, True)]


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
@pytest.mark.parametrize("bidirectional_at_init", [False, True])
def test_decoder_leak_bidirectional_phase_sees_the_future_causal_phase_never(decoder_tokenizer, impl,
                                                                          bidirectional_at_init):
    model = _decoder(decoder_tokenizer, impl, bidirectional_at_init)
    assert model.config.layer_types[0] == "sliding_attention" and "full_attention" in model.config.layer_types
    # phase 1 of decoder-control: the causal mask removed
    with phase_attention(model, causal=False):
        for length, t, pad in CASES:
            assert _future_effect(model, length, t, pad) > 1e-4, (length, t, pad)
        # the first layer is a sliding-window one: it alone already sees the next tokens
        assert _future_effect(model, 3 * WINDOW, WINDOW + 4, False, layer=0) > 1e-4
        # ... but only within its window, on both sides: tokens >= WINDOW to the right stay out of layer 0
        ids, _, mask = _pair(model.config.vocab_size, 3 * WINDOW, 0, True)
        far = ids.clone()
        far[:, 10 + WINDOW:] = (far[:, 10 + WINDOW:] + 1) % model.config.vocab_size
        with torch.no_grad():
            h = [model(x, attention_mask=mask, output_hidden_states=True).hidden_states[1] for x in (ids, far)]
        assert torch.equal(h[0][:, : 11], h[1][:, : 11]) and not torch.equal(h[0][:, 11:], h[1][:, 11:])
    assert model.config.use_bidirectional_attention is True  # kept for the phase-1 checkpoint
    # phase 2: causal again, whatever the model was built or loaded with
    with phase_attention(model, causal=True):
        for length, t, pad in CASES:
            assert _future_effect(model, length, t, pad) == 0.0, (length, t, pad)
    assert model.config.use_bidirectional_attention is False
    assert all(m.is_causal for m in model.modules() if hasattr(m, "sliding_window"))


def test_flipping_only_the_config_leaks_on_sdpa(decoder_tokenizer):
    """The pitfall set_bidirectional handles: a model built bidirectional keeps is_causal=False in its
    attention modules, and sdpa reads it when the mask helpers skip an all-ones causal mask."""
    model = _decoder(decoder_tokenizer, "sdpa", bidirectional_at_init=True)
    model.config.use_bidirectional_attention = False
    assert _future_effect(model, WINDOW - 4, 5, False) > 1e-4
    set_bidirectional(model, False)
    assert _future_effect(model, WINDOW - 4, 5, False) == 0.0


def test_bidirectional_context_restores(decoder_tokenizer):
    model = _decoder(decoder_tokenizer, "eager")
    with bidirectional_attention(model):
        assert _future_effect(model, 3 * WINDOW, 20, True) > 1e-4
    assert _future_effect(model, 3 * WINDOW, 20, True) == 0.0
    assert model.config.use_bidirectional_attention is False


def test_mlm_on_a_decoder_has_no_shift(decoder_tokenizer):
    """LMLoss with MLM labels scores the masked token at its own position: equal to the CE of the model's own
    logits at the masked positions against the original ids (not the next ones)."""
    tok = train_tokenizer(TINY_TEXTS, vocab_size=400, decoder=True)
    model = add_mask_token(_decoder(tok, "eager"), tok)
    ids = torch.randint(4, len(tok) - 1, (2, 40), generator=torch.Generator().manual_seed(3))
    corrupted, labels = mlm_mask(ids, 0.3, tok.all_special_ids, tok.mask_token_id, len(tok),
                                 torch.Generator().manual_seed(0))
    keep = labels != -100
    with torch.no_grad(), bidirectional_attention(model):
        loss_sum, n = LMLoss(model)(corrupted, labels)
        logits = model(corrupted).logits
    expected = torch.nn.functional.cross_entropy(logits[keep], ids[keep], reduction="sum")
    shifted = torch.nn.functional.cross_entropy(logits[:, :-1][keep[:, 1:]], ids[:, 1:][keep[:, 1:]], reduction="sum")
    assert int(n) == int(keep.sum()) > 0
    assert torch.allclose(loss_sum, expected, rtol=1e-5)
    assert abs(float(loss_sum - shifted)) > 100 * abs(float(loss_sum - expected))


def test_mask_token_added_and_resized_round_trip(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = train_tokenizer(TINY_TEXTS, vocab_size=400, decoder=True)
    assert tok.mask_token is None
    model = build_gemma3_causal_lm(tok, seed=0)
    before = model.get_input_embeddings().weight.detach().clone()
    n = len(tok)
    model = add_mask_token(model, tok, seed=0)
    assert tok.mask_token == "<mask>" and tok.mask_token_id == n
    assert model.get_input_embeddings().weight.shape[0] == n + 1 == model.config.vocab_size
    assert model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()  # still tied
    assert torch.equal(model.get_input_embeddings().weight[:n], before)  # old rows untouched
    assert model.config.biobench_mask_token == {"token": "<mask>", "id": n, "added_to_tokenizer": True,
                                                "embeddings": [n, n + 1]}
    assert add_mask_token(model, tok) is model and len(tok) == n + 1  # idempotent
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    back, back_tok = AutoModelForCausalLM.from_pretrained(tmp_path), AutoTokenizer.from_pretrained(tmp_path)
    assert type(back).__name__ == "Gemma3ForCausalLM"
    assert back_tok.mask_token_id == n and back_tok.convert_ids_to_tokens(n) == "<mask>"
    assert back_tok("a <mask> b", add_special_tokens=False)["input_ids"].count(n) == 1
    assert back.config.biobench_mask_token["id"] == n
    assert torch.equal(back.get_input_embeddings().weight, model.get_input_embeddings().weight)


def test_existing_mask_token_is_reused_not_added():
    tok = train_tokenizer(TINY_TEXTS, vocab_size=400, decoder=True)
    tok.add_special_tokens({"additional_special_tokens": ["<mask>"]})  # in the vocabulary, as in Gemma's
    model = build_gemma3_causal_lm(tok, seed=0)
    n = len(tok)
    add_mask_token(model, tok)
    assert tok.mask_token_id == tok.convert_tokens_to_ids("<mask>") == n - 1 and len(tok) == n
    assert model.config.biobench_mask_token["added_to_tokenizer"] is False
    assert model.config.biobench_mask_token["embeddings"] == [n, n]


# ---------------------------------------------------------------- end to end (trainer)
@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": f"{t} Observation {i}."}) + "\n"
                            for i in range(30) for t in TINY_TEXTS[:8]))
    return path


def _cfg(corpus: Path, out: Path, **kw) -> PretrainConfig:
    base = dict(recipe="decoder-control", model="preset:tiny-decoder", corpus=str(corpus), out=out,
                tokens=4 * 4 * 64, batch_size=4, seq_len=64, micro_batch_size=2, decay_ratio=0.5, progress=False,
                cache_dir=out.parent / "cache", lr=1e-3)
    base.update(kw)
    return PretrainConfig(**base)


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


def _log(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]


def test_decoder_control_end_to_end(corpus, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "dec"
    final = train(_cfg(corpus, out))
    log = _log(out)
    assert [r["objective"] for r in log] == ["mlm"] * 4 + ["clm"] * 2
    assert all(r["loss"] > 0 for r in log)
    meta = {name: checkpoint.read_meta(out / name) for name in ("init", "phase1", "final")}
    mask = meta["final"]["mask_token"]
    assert mask["token"] == "<mask>" and mask["added_to_tokenizer"] is True
    assert meta["final"]["attention"] == {"phase1": "bidirectional", "final": "causal"}
    assert meta["final"]["decoder"] is True and meta["init"]["tokens"]["seen"] == 0
    assert json.loads((out / "phase1" / "config.json").read_text())["use_bidirectional_attention"] is True
    assert json.loads((out / "final" / "config.json").read_text())["use_bidirectional_attention"] is False
    model = AutoModelForCausalLM.from_pretrained(final)
    tok = AutoTokenizer.from_pretrained(final)
    assert tok.mask_token_id == mask["id"] and model.config.vocab_size == len(tok)
    init, end = _weights(out / "init"), _weights(final)
    assert init.keys() == end.keys()
    assert all(init[k].shape == end[k].shape for k in init)  # all weights carry over, no new parameters
    assert any(not torch.equal(init[k], end[k]) for k in init)
    # the reloaded final model is causal (default sdpa, no padding: the mask-skip path)
    ids = torch.randint(4, len(tok), (1, 30))
    changed = ids.clone()
    changed[:, 10:] = (changed[:, 10:] + 1) % len(tok)
    with torch.no_grad():
        assert torch.equal(model.eval()(ids).logits[:, :10], model(changed).logits[:, :10])


def test_decoder_control_resumes_from_phase1_and_matches(corpus, tmp_path):
    full = train(_cfg(corpus, tmp_path / "full"))
    cut = train(_cfg(corpus, tmp_path / "cut", stop_after_steps=4))
    assert cut is None
    resumed = train(_cfg(corpus, tmp_path / "cut", resume=True))
    a, b = _weights(full), _weights(resumed)
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_recipe_and_model_kind_must_match(corpus, tmp_path, tiny_mlm_dir):
    with pytest.raises(ConfigError, match="runs on a causal LM"):
        Trainer(_cfg(corpus, tmp_path / "a", model="preset:tiny"))
    with pytest.raises(ConfigError, match="is a decoder"):
        Trainer(_cfg(corpus, tmp_path / "b", recipe="mlm"))
    with pytest.raises(ConfigError, match="runs on a causal LM"):
        Trainer(_cfg(corpus, tmp_path / "c", model=str(tiny_mlm_dir)))


# ---------------------------------------------------------------- seed-noise control
def test_same_data_seed_different_seed_same_digests_different_weights(corpus, tmp_path, tiny_mlm_dir):
    """As in the paper, both seeds start from the same saved model: --seed alone (MLM masking) moves them apart."""
    kw = dict(recipe="mlm", model=str(tiny_mlm_dir), tokens=3 * 4 * 64, data_seed=5)
    a = train(_cfg(corpus, tmp_path / "s17", seed=17, **kw))
    b = train(_cfg(corpus, tmp_path / "s42", seed=42, **kw))
    c = train(_cfg(corpus, tmp_path / "d6", seed=17, **{**kw, "data_seed": 6}))
    digests = {name: [r["data_digest"] for r in _log(tmp_path / name)] for name in ("s17", "s42", "d6")}
    assert len(digests["s17"]) == 5 and len(set(digests["s17"])) == 5
    assert digests["s17"] == digests["s42"]
    assert digests["s17"] != digests["d6"]
    wa, wb, wc = _weights(a), _weights(b), _weights(c)
    assert max(float((wa[k] - wb[k]).abs().max()) for k in wa) > 1e-3
    assert max(float((wa[k] - wc[k]).abs().max()) for k in wa) > 1e-3
    meta = checkpoint.read_meta(a)
    assert (meta["seed"], meta["data_seed"]) == (17, 5)
    assert checkpoint.read_meta(tmp_path / "s17" / "init")["data_seed"] == 5
    assert all(torch.equal(w, _weights(tmp_path / "s42" / "init")[k]) for k, w in _weights(tmp_path / "s17" / "init").items())


def test_data_seed_defaults_to_seed_and_digest_matches_the_batches(corpus, tmp_path):
    import hashlib

    trainer = Trainer(_cfg(corpus, tmp_path / "t", recipe="mlm", model="preset:tiny", seed=3))
    assert trainer.data_seed == 3 and trainer.packed.seed == 3
    from biobench.training.packing import step_digest

    batch = trainer.packed.batch(list(range(4, 8)))
    h = hashlib.blake2b(digest_size=8)
    for row, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True):
        h.update(row[mask.bool()].numpy().astype("int64").tobytes())
    assert step_digest(trainer.packed, 4, 4) == h.hexdigest()


def test_a_run_stopped_before_its_first_checkpoint_can_start_again(corpus, tmp_path):
    """init/ alone (no resumable checkpoint yet) must not lock the folder."""
    out = tmp_path / "run"
    assert train(_cfg(corpus, out, recipe="mlm", model="preset:tiny", stop_after_steps=1)) is None
    assert (out / "init").is_dir() and not (out / "phase1").exists()
    assert train(_cfg(corpus, out, recipe="mlm", model="preset:tiny")) == out / "final"
    assert [r["step"] for r in _log(out)] == list(range(1, 7))
