"""Per-document weights (issue 49 §2): `corpus build --weight-field F` records each document's weight, checked at
build time (one line naming the file and line); a mix source's `weight = "F"` reads each document a deterministic
number of times (mixture.repeat_counts), copies a layer apart, no copy on disk; plan and pretrain use it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from biobench import cli
from biobench.errors import ConfigError, DataError
from biobench.training import mixture, token_store
from biobench.training.packing import PackedCorpus


def test_repeat_counts_are_whole_parts_plus_a_fixed_draw_with_the_weights_mean():
    assert mixture.repeat_counts(np.array([0.0, 1.0, 10.0, 100.0, 3.0])).tolist() == [0, 1, 10, 100, 3]
    weights = np.full(200_000, 2.5)
    counts = mixture.repeat_counts(weights)
    assert set(np.unique(counts).tolist()) == {2, 3}
    assert abs(counts.mean() - 2.5) < 0.01  # the expected count is the weight
    assert abs(mixture.repeat_counts(np.full(200_000, 0.1)).mean() - 0.1) < 0.005
    # deterministic: the same counts again, and a document's count depends on its own weight and index only
    assert (mixture.repeat_counts(weights) == counts).all()
    other = weights.copy()
    other[::2] = 7.0
    assert (mixture.repeat_counts(other)[1::2] == counts[1::2]).all()


def _weighted_source(path: Path, weights: list[float], texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t, "score": w}) + "\n" for t, w in zip(texts, weights, strict=True)))
    return path


def test_build_records_weights_and_bad_weights_are_one_line_naming_the_line(tmp_path, tok_dir, capsys):
    texts = [f"le patient numéro {i} présente une fièvre" for i in range(6)]
    src = _weighted_source(tmp_path / "w.jsonl", [0, 1, 2.5, 10, 100, 1], texts)
    assert cli.main(["corpus", "build", str(src), "--tokenizer", str(tok_dir), "--out", str(tmp_path / "s"),
                     "--weight-field", "score"]) == 0
    store = token_store.open_store(tmp_path / "s")
    assert store.weight_field == "score" and store.weights().tolist() == [0, 1, 2.5, 10, 100, 1]
    capsys.readouterr()
    # the weight shard is checked like the others: one flipped byte is a damaged store
    wgt = next((tmp_path / "s" / "shards").glob("*.wgt"))
    wgt.write_bytes(wgt.read_bytes()[:-1] + b"\x7f")
    with pytest.raises(DataError, match=r"is damaged .*\.wgt does not match its sha256"):
        token_store.open_store(tmp_path / "s")
    bad = {"-1": "is -1; give a finite number from 0 to 1000", "1e9": "is 1000000000.0; give a finite number",
           '"high"': "is str, not a number", "true": "is bool, not a number"}
    for number, (value, said) in enumerate(bad.items()):
        path = tmp_path / f"bad{number}.jsonl"
        path.write_text('{"text": "a b", "score": 1}\n' + f'{{"text": "c d", "score": {value}}}\n')
        assert cli.main(["corpus", "build", str(path), "--tokenizer", str(tok_dir), "--out",
                         str(tmp_path / f"bad{number}"), "--weight-field", "score"]) != 0
        err = capsys.readouterr().err
        assert f"{path}:2: weight field 'score' {said}" in err and "Traceback" not in err, err
    (tmp_path / "nan.jsonl").write_text('{"text": "a b", "score": NaN}\n')
    assert cli.main(["corpus", "build", str(tmp_path / "nan.jsonl"), "--tokenizer", str(tok_dir), "--out",
                     str(tmp_path / "nan"), "--weight-field", "score"]) != 0
    assert "nan.jsonl:1" in capsys.readouterr().err
    (tmp_path / "none.jsonl").write_text('{"text": "a b"}\n')
    assert cli.main(["corpus", "build", str(tmp_path / "none.jsonl"), "--tokenizer", str(tok_dir), "--out",
                     str(tmp_path / "none"), "--weight-field", "score"]) != 0
    assert "none.jsonl:1: no weight field 'score'; every record needs one" in capsys.readouterr().err
    (tmp_path / "prose.txt").write_text("a b\n\nc d\n")
    assert cli.main(["corpus", "build", str(tmp_path / "prose.txt"), "--tokenizer", str(tok_dir), "--out",
                     str(tmp_path / "prose"), "--weight-field", "score"]) != 0
    assert "a text file has no fields; --weight-field needs JSONL or parquet" in capsys.readouterr().err


def test_a_weighted_mix_source_repeats_documents_in_layers_with_weight_proportional_token_shares(tmp_path, tok_dir,
                                                                                                 capsys):
    # two kinds of paragraphs: "clinical" weight 10, "other" weight 1
    texts = [("clinique " if i % 2 else "autre ") * (8 + i) for i in range(40)]  # distinct: dedup keeps each
    weights = [10.0 if i % 2 else 1.0 for i in range(40)]
    src = _weighted_source(tmp_path / "c.jsonl", weights, texts)
    token_store.build([str(src)], tmp_path / "clin", str(tok_dir), weight_field="score")
    store = token_store.open_store(tmp_path / "clin")
    source = mixture.MixSource("clin", tmp_path / "clin", 1.0, 1.0, weight="score")
    tokens, offsets, layers = mixture.source_stream(source, store)
    lengths = np.diff(store.offsets)
    assert len(tokens) == int((lengths * np.array(weights, dtype=np.int64)).sum())
    clinical_share = 10 * lengths[1::2].sum() / (10 * lengths[1::2].sum() + lengths[0::2].sum())
    # layer 0 is every document in store order; later layers only the weight-10 ones; never two copies adjacent
    repeated = tokens.documents
    assert repeated[:40].tolist() == list(range(40)) and set(repeated[40:].tolist()) == set(range(1, 40, 2))
    assert (np.diff(repeated) != 0).all()
    assert tokens[0:len(tokens)].tolist() == np.concatenate(
        [store.tokens[int(store.offsets[d]):int(store.offsets[d + 1])] for d in repeated]).tolist()
    packed = PackedCorpus(tokens, offsets, 16, 0, seed=3, groups=layers)
    is_clinical = np.array([d % 2 == 1 for d in repeated])
    read = np.concatenate([packed.sequence(i)[2] for i in range(packed.n_sequences)])
    read = read[read >= 0]
    assert abs(is_clinical[read].mean() - clinical_share) < 1e-9  # token shares follow the weights
    assert clinical_share > 0.9

    # the mix key end to end: plan table counts the repeated tokens; a store without weights is one line
    (tmp_path / "mix.toml").write_text('[[source]]\nname = "clin"\nstore = "clin"\nshare = 1\nweight = "score"\n')
    assert cli.main(["corpus", "plan", str(tmp_path / "mix.toml"), "--tokens", "1000", "--seq-len", "16", "--batch-size", "4",
                     "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["available_tokens"] == len(tokens)
    token_store.build([str(src)], tmp_path / "plain", str(tok_dir))
    (tmp_path / "plain.toml").write_text('[[source]]\nname = "p"\nstore = "plain"\nshare = 1\nweight = "score"\n')
    assert cli.main(["corpus", "plan", str(tmp_path / "plain.toml"), "--tokens", "1000", "--seq-len", "16", "--batch-size", "4"]) != 0
    assert "mix source 'p': weight = 'score', but store " in capsys.readouterr().err
    (tmp_path / "bad.toml").write_text('[[source]]\nname = "p"\nstore = "plain"\nshare = 1\nweight = 3\n')
    with pytest.raises(ConfigError, match=r"bad.toml: source 'p': weight must name the store's weight field"):
        mixture.read_mix(tmp_path / "bad.toml")


def test_pretrain_reads_a_weighted_mix(tmp_path, tiny_mlm_dir, capsys):
    from biobench.training import checkpoint
    from biobench.training.config import PretrainConfig
    from biobench.training.trainer import train

    texts = [f"Le patient {i} présente une fièvre et une toux sèche." for i in range(30)]
    src = _weighted_source(tmp_path / "c.jsonl", [3.0 if i < 10 else 0.5 for i in range(30)], texts)
    token_store.build([str(src)], tmp_path / "clin", str(tiny_mlm_dir), weight_field="score")
    mix = tmp_path / "mix.toml"
    mix.write_text('[[source]]\nname = "clin"\nstore = "clin"\nshare = 1\nweight = "score"\nmax_passes = 20\n')
    cfg = PretrainConfig(recipe="mlm", model=str(tiny_mlm_dir), corpus=str(mix), out=tmp_path / "run",
                         tokens=2 * 4 * 64, batch_size=4, seq_len=64, micro_batch_size=1, decay_ratio=0.5,
                         progress=False, lr=1e-3, device="cpu", cache_dir=tmp_path / "cache", save_minutes=None)
    train(cfg)
    store = token_store.open_store(tmp_path / "clin")
    counts = mixture.repeat_counts(store.weights())
    expected = int((np.diff(store.offsets) * counts).sum())
    plan = checkpoint.read_meta(tmp_path / "run" / "final")["corpus_record"]["token_store"]["plan"]
    assert plan[0]["available_tokens"] == expected and expected < len(store.tokens) * 3
    assert f"{expected:,}" in capsys.readouterr().out
