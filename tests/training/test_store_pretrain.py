"""`pretrain --corpus` from a token store and a mix file: the plan table recorded, raw text built into a store
before training, refusals in one line, and a run stopped at step k then resumed on 2 processes (gloo) reading
the same per-step data as an uninterrupted 1-process run (issue 49 §1-§2)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from biobench.errors import ConfigError
from biobench.training import checkpoint, corpus_input, token_store
from biobench.training.config import PretrainConfig

TEXTS = ["Le patient présente une fièvre à 39 degrés et une toux sèche.", "Traitement par amoxicilline 1 g.",
         "Scanner thoracique : nodule pulmonaire de 12 mm.", "Carcinome canalaire infiltrant du sein gauche."]


def _stores(root: Path, model_dir: Path) -> Path:
    """Two stores (literature-like, clinical-like) and a 70/30 mix of them."""
    root.mkdir(parents=True, exist_ok=True)
    for name, n in (("lit", 80), ("clin", 4)):
        src = root / f"{name}.jsonl"
        src.write_text("".join(json.dumps({"text": f"{TEXTS[i % 4]} {name} cas {i}."}) + "\n" for i in range(n)))
        token_store.build([str(src)], root / name, str(model_dir))
    mix = root / "mix.toml"
    mix.write_text('[[source]]\nname = "lit"\nstore = "lit"\nshare = 0.7\n\n'
                   '[[source]]\nname = "clin"\nstore = "clin"\nshare = 0.3\nmax_passes = 50\n')
    return mix


def _cfg(corpus: Path, out: Path, model: Path, **kw) -> PretrainConfig:
    base = dict(recipe="mlm", model=str(model), corpus=str(corpus), out=out, tokens=4 * 4 * 64, batch_size=4,
                seq_len=64, micro_batch_size=1, decay_ratio=0.5, progress=False, lr=1e-3, device="cpu",
                cache_dir=out.parent / "cache", save_minutes=None)
    base.update(kw)
    return PretrainConfig(**base)


def _digests(out: Path) -> list[str]:
    return [json.loads(line)["data_digest"] for line in (out / "train_log.jsonl").read_text().splitlines()]


def _worker(rank: int, world: int, port: int, kwargs: dict) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    torch.set_num_threads(1)
    from biobench.training.trainer import train

    train(_cfg(**kwargs))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_mix_run_resumed_on_two_processes_reads_what_one_uninterrupted_process_reads(tmp_path, tiny_mlm_dir, capsys):
    from biobench import cli
    from biobench.api.pretraining import write_config
    from biobench.training.trainer import train

    mix = _stores(tmp_path / "data", tiny_mlm_dir)
    train(_cfg(mix, tmp_path / "full", tiny_mlm_dir))
    out = capsys.readouterr().out
    assert "mix mix.toml: 24 sequences x 64 tokens" in out and "lit " in out and "clin " in out
    meta = checkpoint.read_meta(tmp_path / "full" / "final")
    plan = {row["name"]: row for row in meta["corpus_record"]["token_store"]["plan"]}
    assert plan["lit"]["target_share"] == 0.7 and abs(plan["clin"]["realised_share"] - 0.3) <= 1 / 24
    assert plan["clin"]["passes"] > 1  # the small source is repeated, each pass reshuffled
    card = (tmp_path / "full" / "final" / "README.md").read_text()
    assert "| mixture | lit: 70.0% target, 70.8% realised" in card and "| token store |" not in card
    # `corpus plan` given the run's config prints the very table pretrain printed, and that table is what the
    # run read: both phases (4 + 2 steps of 4 sequences of 64 tokens), step by step
    table = out[out.index("mix mix.toml:"):].splitlines()[:5]  # title, head, two sources, the dedup note
    assert table[0] == "mix mix.toml: 24 sequences x 64 tokens = 1,536 tokens read (4 phase-1 + 2 decay steps of 4 sequences)"
    assert len(_digests(tmp_path / "full")) * 4 == 24
    write_config(_cfg(mix, tmp_path / "full", tiny_mlm_dir), tmp_path / "run.toml")  # what `pretrain` writes
    assert cli.main(["corpus", "plan", "--config", str(tmp_path / "run.toml")]) == 0
    assert capsys.readouterr().out.splitlines() == table
    # `corpus sample` decodes what a step reads: step 3 (positions 8-11) hashes to the run's logged data_digest
    assert cli.main(["corpus", "sample", "--config", str(tmp_path / "run.toml"), "--position", "8", "--n", "4",
                     "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    digest = hashlib.blake2b(digest_size=8)
    for row in rows:
        digest.update(np.asarray(row["ids"], dtype=np.int64).tobytes())
    assert [r["step"] for r in rows] == [2] * 4 and {r["source"] for r in rows} <= {"lit", "clin"}
    assert digest.hexdigest() == _digests(tmp_path / "full")[2]

    assert train(_cfg(mix, tmp_path / "cut", tiny_mlm_dir, save_every=3 * 4 * 64, stop_after_steps=3)) is None
    mp.spawn(_worker, args=(2, _free_port(), dict(corpus=mix, out=tmp_path / "cut", model=tiny_mlm_dir, resume=True)),
             nprocs=2, join=True)
    full, resumed = _digests(tmp_path / "full"), _digests(tmp_path / "cut")
    assert len(full) == 6 and resumed == full
    assert checkpoint.read_meta(tmp_path / "cut" / "final")["world_size"] == 2


def test_pretrain_reads_a_store_and_builds_raw_text_into_one(tmp_path, tiny_mlm_dir):
    from biobench.training.trainer import train

    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": f"{TEXTS[i % 4]} cas {i}."}) + "\n" for i in range(60)))
    built = token_store.build([str(src)], tmp_path / "store", str(tiny_mlm_dir))
    train(_cfg(built, tmp_path / "from-store", tiny_mlm_dir, tokens=2 * 4 * 64))
    train(_cfg(src, tmp_path / "from-raw", tiny_mlm_dir, tokens=2 * 4 * 64))
    assert _digests(tmp_path / "from-store") == _digests(tmp_path / "from-raw")  # the same tokens, the same order
    raw = checkpoint.read_meta(tmp_path / "from-raw" / "final")["corpus_record"]
    stored = checkpoint.read_meta(tmp_path / "from-store" / "final")["corpus_record"]
    assert raw["files"][0]["path"] == str(src.resolve()) and raw["token_store"]["raw"] is True
    assert raw["token_store"]["id"] == stored["token_store"]["id"]  # the cache holds the same store, by content
    assert (Path(raw["token_store"]["store"]) / token_store.DONE).is_file()


def test_corpus_refusals_come_before_any_model_is_loaded(tmp_path, tiny_mlm_dir, monkeypatch):
    from biobench.training.trainer import Trainer

    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": f"{t} cas {i}."}) + "\n" for i in range(30) for t in TEXTS))
    monkeypatch.setattr(corpus_input, "RAW_BUILD_LIMIT", 1000)
    with pytest.raises(ConfigError, match=rf"more than the 0 GiB pretrain builds itself: .*biobench corpus build "
                                          rf"{src} --tokenizer {tiny_mlm_dir} --out STORE"):
        Trainer(_cfg(src, tmp_path / "big", tiny_mlm_dir))
    monkeypatch.undo()
    store = token_store.build([str(src)], tmp_path / "store", str(tiny_mlm_dir))
    with pytest.raises(ConfigError, match=r"preset:tiny trains its tokenizer on raw text; .* is a token store"):
        Trainer(_cfg(store, tmp_path / "preset", Path("preset:tiny")))
    mix = tmp_path / "mix.toml"
    mix.write_text('[[source]]\nname = "only"\nstore = "store"\nshare = 1\n')
    with pytest.raises(ConfigError, match=r"mix source 'only' cannot fill its share of 100.00%: it needs "):
        Trainer(_cfg(mix, tmp_path / "short", tiny_mlm_dir, tokens=200 * 4 * 64))


def test_corpus_plan_and_pretrain_judge_max_passes_alike_counting_the_decay(tmp_path, tiny_mlm_dir, capsys):
    """max_passes = 1.57 on a source whose phase 1 reads it 1.57 times at most and the whole run (with the decay)
    more: `corpus plan` with pretrain's settings and pretrain refuse it with the same line (issue 59 item 1)."""
    from biobench import cli
    from biobench.training.trainer import Trainer

    _stores(tmp_path / "data", tiny_mlm_dir)
    n = -(-len(token_store.open_store(tmp_path / "data" / "lit").tokens) // 64)  # the store's sequences of 64
    steps1 = math.floor(1.57 * n)
    mix = tmp_path / "data" / "one.toml"
    mix.write_text('[[source]]\nname = "only"\nstore = "lit"\nshare = 1\nmax_passes = 1.57\n')
    cfg = _cfg(mix, tmp_path / "run", tiny_mlm_dir, tokens=steps1 * 64, batch_size=1)
    with pytest.raises(ConfigError) as refused:
        Trainer(cfg)
    capsys.readouterr()
    assert cli.main(["corpus", "plan", str(mix), "--tokens", str(steps1 * 64), "--seq-len", "64", "--batch-size", "1",
                     "--decay-ratio", "0.5"]) == 1
    assert capsys.readouterr().err.strip() == str(refused.value)
    assert f"needs {(steps1 + round(0.5 * steps1)) / n:.2f} passes" in str(refused.value)


def test_pretrain_resolves_a_model_alias_as_corpus_build_does(tmp_path, minilm_dir, monkeypatch):
    """Issue 59 item 5: `pretrain --model all-MiniLM-L6-v2` loads what `corpus build --tokenizer all-MiniLM-L6-v2`
    tokenises with (the alias's folder), not a hub id 'all-MiniLM-L6-v2' that does not exist."""
    from biobench.api import corpus as corpus_api
    from biobench.api.pretraining import pretrain
    from biobench.training import trainer

    seen = []
    monkeypatch.setattr(trainer, "train", lambda cfg: seen.append(cfg))
    pretrain("all-MiniLM-L6-v2", tmp_path / "c.txt", "1M", tmp_path / "out", recipe="mlm", device="cpu")
    assert seen[0].model == str(minilm_dir) == corpus_api.tokenizer_source("all-MiniLM-L6-v2")
    assert 'model = "all-MiniLM-L6-v2"' in (tmp_path / "out" / "pretrain_config.toml").read_text()  # as given


def test_pretrain_on_a_store_whose_build_failed_says_it_is_unfinished(tmp_path, tiny_mlm_dir, capsys):
    """Issue 59 item 5: a failed build leaves its lock; `pretrain --corpus` on that folder names an unfinished
    store (and the command that finishes it), not "holds no .jsonl files"."""
    from biobench import cli

    empty = tmp_path / "empty.jsonl"
    empty.write_text(json.dumps({"text": "   "}) + "\n")
    assert cli.main(["corpus", "build", str(empty), "--tokenizer", str(tiny_mlm_dir), "--out", str(tmp_path / "s")]) != 0
    assert "holds no non-empty documents" in capsys.readouterr().err
    assert (tmp_path / "s" / token_store.BUILD_LOCK).exists() and not (tmp_path / "s" / token_store.DONE).exists()
    assert cli.main(["pretrain", "--model", str(tiny_mlm_dir), "--corpus", str(tmp_path / "s"), "--tokens", "1K", "--seq-len", "64", "--batch-size", "4",
                     "--out", str(tmp_path / "run"), "--device", "cpu"]) != 0
    err = capsys.readouterr().err.strip()
    assert err == (f"error: --corpus {tmp_path / 's'} is an unfinished token store (its build stopped or is still "
                   "running): finish it with the same biobench corpus build command, then pretrain again")


@pytest.mark.slow
def test_the_paper_fr_mix_builds_with_one_command_then_plan_and_pretrain_agree(tmp_path, tiny_mlm_dir, capsys):
    """Issue 59 item 4: examples/mixes/paper-fr.toml, its tokenizer the tiny model's and its build_from paths
    holding small local files: plan names every missing store with its command; `corpus build --mix` (a real
    process) builds them all; then `corpus plan` prints the very table `pretrain --corpus` trains on."""
    import subprocess
    import sys
    import tomllib

    from biobench import cli
    from biobench.api.pretraining import write_config
    from biobench.training.trainer import train

    text = (Path(__file__).resolve().parents[2] / "examples" / "mixes" / "paper-fr.toml").read_text()
    mix = tmp_path / "mixes" / "paper-fr.toml"
    mix.parent.mkdir()
    mix.write_text(text.replace('tokenizer = "almanach/moderncamembert-base"', f'tokenizer = "{tiny_mlm_dir}"'))
    sizes = {"literature": 150, "synthetic-qa": 80, "e3c": 5, "ema-leaflets": 10}
    for source in tomllib.loads(text)["source"]:
        folder = mix.parent / source["build_from"]
        folder.mkdir(parents=True)
        rows = [{"text": f"{TEXTS[i % 4]} {source['name']} {i}.", "upsample": 1 + i % 2}
                for i in range(sizes[source["name"]])]
        (folder / "part-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    assert cli.main(["corpus", "plan", str(mix), "--tokens", "1K"]) == 2
    err = capsys.readouterr().err
    assert f"4 of 4 store(s) not built yet; build them all with: biobench corpus build --mix {mix}" in err
    assert f"literature: biobench corpus build {mix.parent / 'corpus/fr/literature'} --tokenizer {tiny_mlm_dir} " \
           f"--out {mix.parent / 'stores/fr/literature'} --weight-field upsample" in err

    built = subprocess.run([str(Path(sys.executable).parent / "biobench"), "corpus", "build", "--mix", str(mix)],
                           capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300)
    assert built.returncode == 0, built.stderr
    assert "4 store(s) built now, 4 in all" in built.stdout
    for name in sizes:
        assert (mix.parent / "stores" / "fr" / name / token_store.DONE).is_file()
    assert token_store.open_store(mix.parent / "stores/fr/literature").weight_field == "upsample"
    assert cli.main(["corpus", "build", "--mix", str(mix)]) == 0
    assert "0 store(s) built now, 4 in all" in capsys.readouterr().out

    cfg = _cfg(mix, tmp_path / "run", tiny_mlm_dir)
    write_config(cfg, tmp_path / "run.toml")
    assert cli.main(["corpus", "plan", "--config", str(tmp_path / "run.toml")]) == 0
    planned = capsys.readouterr().out.splitlines()
    assert planned[0].startswith("mix paper-fr.toml: 24 sequences x 64 tokens = 1,536 tokens read")
    train(cfg)
    out = capsys.readouterr().out
    assert out[out.index("mix paper-fr.toml:"):].splitlines()[:len(planned)] == planned
    assert len(_digests(tmp_path / "run")) * 4 == 24


@pytest.mark.slow
def test_pretrain_logs_the_heldout_loss_per_source_at_eval_every_and_each_phase_end(tmp_path, tiny_mlm_dir):
    """Issue 59 item 6: a real `biobench pretrain --heldout-docs 1 --eval-every 3` (detour: 4 CLM steps, 2 MLM decay
    steps) evaluates each source's held-out document at steps 3, 4 (phase end) and 6 (both), with the phase's
    objective, logs the losses (train_log.jsonl, the output) and records the last in the checkpoint; `corpus plan`
    with the same settings prints the plan pretrain trained on; evaluating leaves training untouched (the same
    losses and data as a run that evaluates at the phase ends only)."""
    from biobench.training.trainer import train

    from tests.support import run_biobench

    mix = _stores(tmp_path / "data", tiny_mlm_dir)
    run = ["--tokens", str(4 * 4 * 64), "--batch-size", "4", "--seq-len", "64", "--decay-ratio", "0.5"]
    done = run_biobench("pretrain", "--recipe", "detour", "--model", str(tiny_mlm_dir), "--corpus", str(mix),
                        "--out", str(tmp_path / "run"), *run, "--micro-batch-size", "1", "--lr", "1e-3",
                        "--device", "cpu", "--no-progress", "--save-minutes", "0", "--heldout-docs", "1",
                        "--eval-every", "3", "--threads", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    log = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    evaluated = {r["step"]: (r["objective"], r["validation"]) for r in log if "validation" in r}
    assert sorted(evaluated) == [3, 4, 6] and [evaluated[s][0] for s in (3, 4, 6)] == ["clm", "clm", "mlm"]
    for _, losses in evaluated.values():
        assert sorted(losses) == ["clin", "lit"] and all(0 < v < 20 for v in losses.values())
    assert "step 3 phase 1 clm validation loss: lit " in done.stdout and "step 6 phase 2 mlm validation" in done.stdout
    meta = checkpoint.read_meta(tmp_path / "run" / "final")
    assert meta["validation"] == {"step": 6, "phase": 2, "objective": "mlm", "loss": evaluated[6][1]}
    rows = meta["corpus_record"]["token_store"]["plan"]
    assert [(r["name"], r["heldout_documents"]) for r in rows] == [("lit", 1), ("clin", 1)]
    plan = run_biobench("corpus", "plan", str(mix), *run, "--heldout-docs", "1", "--json", cwd=tmp_path)
    assert plan.returncode == 0 and json.loads(plan.stdout) == rows
    train(_cfg(mix, tmp_path / "ends", tiny_mlm_dir, recipe="detour", heldout_docs=1))
    ends = [json.loads(line) for line in (tmp_path / "ends" / "train_log.jsonl").read_text().splitlines()]
    assert [(r["loss"], r["data_digest"]) for r in ends] == [(r["loss"], r["data_digest"]) for r in log]
    assert {r["step"]: r["validation"] for r in ends if "validation" in r} == {4: evaluated[4][1], 6: evaluated[6][1]}


def test_heldout_settings_are_refused_in_one_line_before_training(tmp_path, tiny_mlm_dir, capsys):
    """Negative or non-finite counts, --eval-every without held-out documents, and more held-out documents than a
    source reads: exit status 2, one line naming the flag or the source and the fix."""
    from biobench import cli

    mix = _stores(tmp_path / "data", tiny_mlm_dir)
    base = ["pretrain", "--model", str(tiny_mlm_dir), "--corpus", str(mix), "--tokens", "1024", "--batch-size", "4",
            "--seq-len", "64", "--device", "cpu", "--no-progress"]
    for i, (extra, message) in enumerate([
            (["--heldout-docs", "-1"], "bad --heldout-docs value '-1': must be from 0 to 1e+07"),
            (["--heldout-docs", "nan"], "--heldout-docs"),
            (["--heldout-docs", "2", "--eval-every", "inf"], "--eval-every"),
            (["--eval-every", "3"], "--eval-every 3 evaluates held-out documents: give --heldout-docs N too"),
            (["--heldout-docs", "4"], "mix source 'clin': --heldout-docs 4 holds out all of its 4 document(s) it "
                                      "reads; lower --heldout-docs below 4")]):
        assert cli.main([*base, "--out", str(tmp_path / f"out{i}"), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err and "Traceback" not in err
        assert not (tmp_path / f"out{i}" / "init").exists()  # nothing trained, no model saved


@pytest.mark.slow
def test_two_processes_split_the_heldout_sequences_and_log_one_processs_losses(tmp_path, tiny_mlm_dir):
    """Under torchrun each rank evaluates every other held-out sequence (a rank with none left runs a row without
    labels, so both make the same forward passes) and the sums are reduced: the logged losses are the
    one-process run's."""
    from biobench.training import mixture
    from biobench.training.trainer import train

    mix = _stores(tmp_path / "data", tiny_mlm_dir)
    extra = dict(heldout_docs=2, eval_every=2, seq_len=32, tokens=4 * 4 * 32)
    sources = mixture.read_mix(mix)
    stores = [token_store.open_store(s.store) for s in sources.sources]
    held = mixture.split_sources(sources, stores, 2)[2]
    sizes = [corpus_input.validation_corpus(s, h, 32, 0).n_sequences for s, h in zip(stores, held, strict=True)]
    assert sizes == [3, 3]  # over two ranks: two sequences on rank 0, one and a row without labels on rank 1
    train(_cfg(mix, tmp_path / "one", tiny_mlm_dir, **extra))
    mp.spawn(_worker, args=(2, _free_port(), dict(corpus=mix, out=tmp_path / "two", model=tiny_mlm_dir, **extra)),
             nprocs=2, join=True)

    def evaluated(out: Path) -> dict[int, dict[str, float]]:
        return {json.loads(line)["step"]: json.loads(line)["validation"]
                for line in (out / "train_log.jsonl").read_text().splitlines() if "validation" in line}

    one, two = evaluated(tmp_path / "one"), evaluated(tmp_path / "two")
    assert sorted(one) == sorted(two) == [2, 4, 6]
    for step in one:
        assert one[step].keys() == two[step].keys() == {"lit", "clin"}
        assert all(math.isclose(one[step][k], two[step][k], rel_tol=1e-4) for k in one[step])
