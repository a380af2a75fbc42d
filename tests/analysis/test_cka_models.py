"""CKA on decoders (a tiny Gemma-3 built from a config), mixed text sources, and the trajectory of a run."""

import json

import numpy as np
import pytest
from biobench import cli
from biobench.analysis import cka, features
from conftest import TINY_TEXTS


def _gemma(tokenizer, seed: int, layers: int = 3):
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(seed)
    config = Gemma3TextConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=256,
        sliding_window=16, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
    )
    return Gemma3ForCausalLM(config).eval()


@pytest.fixture(scope="module")
def decoders(tmp_path_factory, tiny_tokenizer):
    root = tmp_path_factory.mktemp("decoders")
    out = {}
    for name, seed in (("g0", 0), ("g1", 1)):
        _gemma(tiny_tokenizer, seed).save_pretrained(root / name)
        tiny_tokenizer.save_pretrained(root / name)
        out[name] = root / name
    return out


@pytest.fixture(scope="module")
def two_sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    (root / "a.txt").write_text("\n".join(TINY_TEXTS[:6]) + "\n", encoding="utf-8")
    (root / "b").mkdir()
    (root / "b" / "docs.jsonl").write_text(
        "".join(json.dumps({"text": t + " " + t}) + "\n" for t in TINY_TEXTS[6:]), encoding="utf-8")
    return root / "a.txt", root / "b"


def test_decoder_features_are_mask_aware(decoders):
    """A text padded inside a batch pools to the same vector as alone: padding never enters the mean."""
    model, tokenizer, info = features.load_frozen_encoder(decoders["g0"])
    assert info.architecture == "Gemma3TextModel"
    texts = [TINY_TEXTS[0], TINY_TEXTS[1] + " " + TINY_TEXTS[2]]  # different lengths: the first is padded
    together = features.layer_features(model, tokenizer, texts, max_length=64, batch_size=2)
    alone = features.layer_features(model, tokenizer, texts[:1], max_length=64, batch_size=1)
    assert len(together) == 3 + 1  # embeddings + 3 transformer layers
    for layer_t, layer_a in zip(together, alone, strict=True):
        np.testing.assert_allclose(layer_t[0], layer_a[0], rtol=1e-4, atol=1e-5)


def test_cka_on_decoders_with_two_sources(decoders, two_sources, tmp_path, capsys):
    args = ["analyze", "cka", "--models", str(decoders["g0"]), str(decoders["g1"]),
            "--texts", str(two_sources[0]), str(two_sources[1]), "--n", "8", "--sample-seeds", "42,43,44",
            "--max-length", "48", "--device", "cpu", "--out", str(tmp_path)]
    assert cli.main(args) == 0
    report = json.loads((tmp_path / "cka.json").read_text())
    assert [r["layer"] for r in report["layers"]] == [0, 1, 2]
    assert report["models"]["a"]["architecture"] == "Gemma3TextModel"
    assert [s["n_texts"] for s in report["texts"]] == [6, len(TINY_TEXTS) - 6]
    assert [s["drawn_per_seed"] for s in report["texts"]] == [4, 4] and report["n"] == 8
    s = report["summary"]
    assert s["n_seeds"] == 3 and s["ci_low"] <= s["mean_divergence"] <= s["ci_high"]
    assert 0 < s["mean_divergence"] < 1  # two random decoders differ
    assert "Table 4: " in capsys.readouterr().out


def test_mixed_sampling_takes_equal_shares_per_seed():
    samples = cka.sample_mixed([1000, 30], 10, [42, 43, 44])
    for rows in samples.values():
        assert len(rows) == len(set(rows)) == 10
        assert (rows < 1000).sum() == 5 and (rows >= 1000).sum() == 5  # 5 from each source
    assert not np.array_equal(samples[42], samples[43])
    small = cka.sample_mixed([3, 100], 10, [1])[1]  # a source smaller than its share gives all it has
    assert list(small[:3]) == [0, 1, 2] and len(small) == 8
    assert np.array_equal(cka.sample_mixed([50], 10, [7])[7], cka.sample_indices(50, 10, [7])[7])


def test_embeddings_only_averaged_when_asked():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 6))
    a = [x, x @ rng.normal(size=(6, 6)), rng.normal(size=(30, 6))]
    b = [x + rng.normal(size=(30, 6)), x, x]
    samples = cka.sample_indices(30, 20, [1, 2, 3])
    plain = cka.cka_report({"a": a, "b": b}, "a", "b", None, samples)
    both = cka.cka_report({"a": a, "b": b}, "a", "b", None, samples, include_embeddings=True)
    layers = [r["divergence"] for r in plain["layers"]]
    assert plain["mean_divergence"] == pytest.approx(np.mean(layers))
    assert both["mean_divergence"] == pytest.approx(np.mean([plain["embeddings"]["divergence"], *layers]))
    assert plain["summary"]["layers_averaged"] == "transformer layers 0-1"


def _fake_run(root, tokenizer, start_dir):
    """A run folder as `biobench pretrain --save-every` writes it: step-*/, phase1/, final/ + metadata."""
    import torch
    from transformers import AutoModelForMaskedLM

    run = root / "run"
    for k, (name, tokens, phase) in enumerate((("step-100", 100, "step"), ("phase1", 200, "phase1"),
                                                ("step-300", 300, "step"), ("final", 220, "final"))):
        model = AutoModelForMaskedLM.from_pretrained(start_dir)
        with torch.no_grad():
            gen = torch.Generator().manual_seed(k)
            for p in model.parameters():
                p.add_(0.02 * (k + 1) * torch.randn(p.shape, generator=gen))
        model.save_pretrained(run / name)
        tokenizer.save_pretrained(run / name)
        meta = {"base_model": str(start_dir), "phase": phase, "tokens": {"seen": tokens}}
        (run / name / "biobench_pretrain.json").write_text(json.dumps(meta))
    (run / "train_log.jsonl").write_text("")
    return run


def test_cka_trajectory_on_a_run(tmp_path, tiny_tokenizer, tiny_mlm_dir, two_sources, capsys):
    run = _fake_run(tmp_path, tiny_tokenizer, tiny_mlm_dir)
    assert [c["checkpoint"] for c in cka.run_checkpoints(run)] == ["step-100", "phase1", "final", "step-300"]
    args = ["analyze", "cka-trajectory", "--run", str(run), "--texts", str(two_sources[0]), str(two_sources[1]),
            "--n", "8", "--sample-seeds", "1,2", "--max-length", "32", "--device", "cpu"]
    assert cli.main(args) == 0
    report = json.loads((run / "cka_trajectory.json").read_text())
    assert report["schema"] == "biobench.cka-trajectory/1"
    points = report["points"]
    assert [p["tokens"] for p in points] == [100, 200, 220, 300]
    divs = [p["mean_divergence"] for p in points]
    assert all(d > 0 for d in divs) and divs[-1] > divs[0]  # larger perturbation, further from the start
    assert all(len(p["layers"]) == 4 for p in points)
    assert (run / "cka_trajectory.png").stat().st_size > 1000
    assert "step-300" in capsys.readouterr().out


def test_trajectory_needs_a_start_model_for_presets(tmp_path, tiny_tokenizer, tiny_mlm_dir, capsys):
    run = _fake_run(tmp_path, tiny_tokenizer, tiny_mlm_dir)
    for meta_file in run.glob("*/biobench_pretrain.json"):
        meta_file.write_text(json.dumps({**json.loads(meta_file.read_text()), "base_model": "preset:tiny"}))
    assert cli.main(["analyze", "cka-trajectory", "--run", str(run), "--texts", "x", "--device", "cpu"]) == 2
    assert "started from preset:tiny" in capsys.readouterr().err
    assert cli.main(["analyze", "cka-trajectory", "--run", str(tmp_path / "nope"), "--texts", "x"]) == 2
    assert "not a folder" in capsys.readouterr().err
