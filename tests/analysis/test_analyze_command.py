"""`biobench analyze` end to end on tiny models: files written, numbers sane, one-line errors."""

import json
import random

import pytest
from biobench import cli

from tests.support import haystack_corpus as corpus


@pytest.fixture(scope="module")
def models(tmp_path_factory, tiny_tokenizer, tiny_mlm_dir):
    """Three 4-layer tiny ModernBERTs (seeds 0, 1, 2) and a 2-layer one."""
    from biobench.training.presets import build_modernbert_mlm

    root = tmp_path_factory.mktemp("analysis-models")
    out = {"m0": tiny_mlm_dir}
    for name, seed, layers in (("m1", 1, 4), ("m2", 2, 4), ("shallow", 3, 2)):
        build_modernbert_mlm(tiny_tokenizer, "tiny", seed=seed, num_hidden_layers=layers).save_pretrained(root / name)
        tiny_tokenizer.save_pretrained(root / name)
        out[name] = root / name
    return out


@pytest.fixture(scope="module")
def texts_file(tmp_path_factory):
    from conftest import TINY_TEXTS

    path = tmp_path_factory.mktemp("texts") / "texts.txt"
    rng = random.Random(0)
    lines = [" ".join(rng.sample(t.split(), k=len(t.split()))) for t in TINY_TEXTS[:8] for _ in range(6)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_cka_with_noise_ratio(models, texts_file, tmp_path, capsys):
    args = ["analyze", "cka", "--models", str(models["m0"]), str(models["m1"]), "--noise", str(models["m2"]),
            "--texts", str(texts_file), "--n", "30", "--sample-seeds", "1,2", "--max-length", "32",
            "--device", "cpu", "--out", str(tmp_path)]
    assert cli.main(args) == 0
    report = json.loads((tmp_path / "cka.json").read_text())
    # transformer layers 0..L-1 (as --freeze and transplant), the embedding output apart
    assert [row["layer"] for row in report["layers"]] == [0, 1, 2, 3]
    assert report["embeddings"]["layer"] == "embeddings"
    assert report["n"] == 30 and report["sample_seeds"] == [1, 2] and report["models"]["b"]["layers"] == 4
    for row in report["layers"]:
        assert row["cka"] == pytest.approx(1 - row["divergence"])
        assert row["ratio"] == pytest.approx(row["divergence"] / row["noise_divergence"])
    # Table 4: mean over transformer layers only, per seed, then over seeds
    per_seed = {s: sum(v) / 4 for s, v in report["per_seed"].items()}
    assert report["summary"]["per_seed_mean"] == pytest.approx(per_seed)
    assert report["mean_divergence"] == pytest.approx(sum(per_seed.values()) / 2)
    assert report["summary"]["layers_averaged"] == "transformer layers 0-3"
    assert (tmp_path / "cka.png").stat().st_size > 1000
    out = capsys.readouterr().out
    assert "layer  3: CKA" in out and "layer  4" not in out and "embeddings: CKA" in out
    assert "Table 4: " in out and "2 sample seeds" in out


def test_cka_of_a_model_with_itself_is_one(models, texts_file, tmp_path):
    args = ["analyze", "cka", "--models", str(models["m0"]), str(models["m0"]), "--texts", str(texts_file),
            "--n", "20", "--sample-seeds", "3", "--max-length", "32", "--device", "cpu", "--out", str(tmp_path)]
    assert cli.main(args) == 0
    report = json.loads((tmp_path / "cka.json").read_text())
    assert all(row["cka"] == pytest.approx(1.0, abs=1e-9) and row["ratio"] is None for row in report["layers"])
    assert report["summary"]["mean_divergence"] == pytest.approx(0.0, abs=1e-9)
    assert report["summary"]["ci_low"] is None and report["summary"]["n_seeds"] == 1  # one seed: no interval


def test_cka_models_of_different_depth(models, texts_file, tmp_path, capsys):
    base = ["analyze", "cka", "--texts", str(texts_file), "--n", "10", "--sample-seeds", "1", "--max-length", "16",
            "--device", "cpu", "--out", str(tmp_path)]
    assert cli.main(base + ["--models", str(models["m0"]), str(models["shallow"])]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: models have different depths (4 and 2 layers); CKA compares layer l with layer l — pass "
        "--align-relative to pair layers by relative depth instead"
    )
    assert cli.main(base + ["--models", str(models["m0"]), str(models["shallow"]), "--align-relative"]) == 0
    report = json.loads((tmp_path / "cka.json").read_text())
    assert [(r["layer_a"], r["layer_b"]) for r in report["layers"]] == [(1, 0), (3, 1)]


def test_transplant_cli_errors(models, tmp_path, capsys):
    base = ["analyze", "transplant", "--from", str(models["m0"]), "--into", str(models["m1"]), "--out", str(tmp_path)]
    assert cli.main(base + ["--layers", "2-5"]) == 2
    assert "layers 2-5 are outside the source model" in capsys.readouterr().err
    assert cli.main(base + ["--layers", "0-1", "--component", "ffn"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == "error: unknown component 'ffn'; choose one of all, attention, mlp"
    assert cli.main(base + ["--layers", "1-0"]) == 2
    assert capsys.readouterr().err.strip() == ("error: bad --layers value '1-0': range 1-0 is reversed (write 0-1); "
                                                 "use a range like 1-4, a list like 1,3,8 or both (1-4,8)")


def test_needle_generate_and_run(models, tmp_path, capsys):
    haystacks = tmp_path / "hay"
    haystacks.mkdir()
    (haystacks / "corpus.txt").write_text("\n".join(corpus()) + "\n", encoding="utf-8")
    data = tmp_path / "needle"
    assert cli.main(["analyze", "needle", "generate", "--haystacks", str(haystacks), "--out", str(data), "--examples", "48",
                     "--lengths", "256,384", "--tokenizer", str(models["m0"])]) == 0
    rows = [json.loads(line) for line in (data / "needle.jsonl").read_text().splitlines()]
    assert len(rows) == 48 and all(r["length_unit"] == "tokens" and r["n_input_tokens"] <= r["length"] for r in rows)
    meta = json.loads((data / "needle_meta.json").read_text())
    assert (meta["n_examples"], meta["n_pairs"]) == (48, 24)
    assert cli.main(["analyze", "needle", "run", "--model", str(models["m0"]), "--data", str(data), "--out",
                     str(tmp_path / "run"), "--seeds", "1,2", "--epochs", "2", "--device", "cpu"]) == 0
    result = json.loads((tmp_path / "run" / "needle_results.json").read_text())
    assert set(result["by_length"]) == {"256", "384"} and set(result["by_position"]) == {"start", "middle", "end"}
    assert 0.0 <= result["accuracy"] <= 1.0 and len(result["per_seed"]) == 2
    assert result["fact_visible"]["overall"] == 1.0  # an 8192-token model sees every fact
    assert result["probe"] == {"epochs": 2, "lr": 2e-5, "batch_size": 4, "dropout": 0.1, "weight_decay": 0.01}
    assert (tmp_path / "run" / "needle_results.png").is_file()
    captured = capsys.readouterr()
    assert "test accuracy" in captured.out and "note:" not in captured.err  # lengths counted with this model
    # another model: told its lengths were counted in m0's tokens; --lengths keeps those examples only
    assert cli.main(["analyze", "needle", "run", "--model", str(models["m1"]), "--data", str(data), "--out",
                     str(tmp_path / "run-m1"), "--seeds", "1", "--epochs", "1", "--lengths", "256"]) == 0
    captured = capsys.readouterr()
    assert captured.err.strip() == (f"note: {data} counts lengths in the tokens of {meta['tokenizer']}, not of "
                                    f"{models['m1']}; regenerate it with --tokenizer set to this model for exact lengths")
    assert set(json.loads((tmp_path / "run-m1" / "needle_results.json").read_text())["by_length"]) == {"256"}
    assert cli.main(["analyze", "needle", "run", "--model", str(models["m1"]), "--data", str(data), "--lengths",
                     "300-301"]) == 2
    assert capsys.readouterr().err.strip() == f"error: --lengths 300-301: no example of these lengths in {data}"


def test_needle_haystack_folder_too_small(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("Une phrase.\n", encoding="utf-8")
    base = ["analyze", "needle", "generate", "--haystacks", str(tmp_path), "--out", str(tmp_path / "o"),
            "--lengths", "512"]
    assert cli.main(base + ["--pairs", "5", "--length-unit", "words"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: haystack folder '{tmp_path}' holds only 2 words of text, fewer than the longest length 512; "
        "add more texts or lower --lengths"
    )


def test_needle_generate_counts_are_named_and_tokens_need_the_model(tmp_path, capsys):
    base = ["analyze", "needle", "generate", "--haystacks", str(tmp_path), "--out", str(tmp_path / "o")]
    assert cli.main(base + ["--n", "10"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: --n 10 is ambiguous: pass --examples 10 (probe inputs) or --pairs 10 (positive/negative pairs, "
        "two examples each)")
    assert cli.main(base + ["--examples", "7", "--length-unit", "words"]) == 2
    assert "--examples 7: the set is made of positive/negative pairs" in capsys.readouterr().err
    assert cli.main(base) == 2
    assert capsys.readouterr().err.strip() == (
        "error: needle lengths are counted in the evaluated model's tokens: pass --tokenizer MODEL (the model you "
        "will run), or --length-unit words to count whitespace words")


@pytest.mark.slow  # encodes ~300 texts: a minute on a loaded 2-core machine
def test_probe_cli_writes_eval_style_results(models, tmp_path, capsys):
    from biobench.store import iter_results

    args = ["analyze", "probe", "--model", str(models["m0"]), "--task", "demo-cls", "--seeds", "1-2",
            "--limit-train", "120", "--max-length", "48", "--results", str(tmp_path), "--device", "cpu"]
    assert cli.main(args) == 0
    found = list(iter_results(tmp_path))
    assert [r.seed for _, r in found] == [1, 2]
    for path, result in found:
        assert result.protocol["name"] == "probe" and result.task_id == "demo-cls"
        assert path.parent.parent.name.endswith("--probe-mean-last")
        assert 0.0 <= result.macro_f1 <= 1.0
        assert path.with_name(f"seed-{result.seed}.predictions.jsonl").is_file()
        assert list(result.to_dict()) == ["schema", "model", "task", "seed", "protocol", "key", "metrics", "dev_score",
                                          "best_epoch", "timings", "versions", "device", "created", "predictions"]
        assert list(result.details["versions"]) == ["biobench", "torch", "transformers", "scikit-learn", "python"]
        assert path.read_text() == result.to_json()
    capsys.readouterr()
    assert cli.main(args) == 0
    assert capsys.readouterr().out.count("done already") == 2
