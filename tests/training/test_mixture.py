"""Mix files and the mixed sequence order (training/mixture.py): validation in one line, Megatron's greedy keeps
every source within one sequence of its share, `corpus plan`, and pretraining from a store and a mix
(issue 49 §2 and §4)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from biobench.errors import ConfigError
from biobench.training import mixture, token_store

from tests.support import fake_token_store

REPO = Path(__file__).resolve().parents[2]


def _mix(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "mix.toml"
    path.write_text(body)
    return path


def _source(name: str, store: str, amount: str = "share = 0.5", extra: str = "") -> str:
    return f'[[source]]\nname = "{name}"\nstore = "{store}"\n{amount}\n{extra}\n'


@pytest.mark.parametrize("body, message", [
    (_source("a", "s1") + _source("b", "s2", "share = 0.4"), r"shares sum to 0\.9, not 1"),
    (_source("a", "s1", "share = -0.5") + _source("b", "s2", "share = 1.5"), r"share value '-0\.5'"),
    (_source("a", "s1", "share = nan") + _source("b", "s2"), r"share value 'nan'"),
    (_source("a", "s1", "share = inf") + _source("b", "s2"), r"share value 'inf'"),
    (_source("a", "s1") + _source("a", "s2"), r"source 'a' appears twice"),
    (_source("a", "s1") + _source("b", "./s1"), r"store \./s1 is already another source's"),
    (_source("a", "s1", "shares = 0.5") + _source("b", "s2"), r"unknown key 'shares': did you mean 'share'\?"),
    (_source("a", "s1", extra="max_pases = 3") + _source("b", "s2"), r"did you mean 'max_passes'\?"),
    (_source("a", "s1", extra="max_passes = 0.5") + _source("b", "s2"), r"max_passes value '0\.5'"),
    (_source("a", "s1") + _source("b", "s2", "tokens = 100"), r"mix 'share' and 'tokens'"),
    (_source("a", "s1", "share = 0.5\ntokens = 3") + _source("b", "s2"), r"exactly one of share .* or tokens"),
    ('title = "x"\n' + _source("a", "s1", "share = 1"), r"unknown key 'title'"),
    ("", r"expected one or more \[\[source\]\] tables"),
    ("[[source\n", r"not valid TOML"),
    (_source("a b", "s1", "share = 1"), r"name 'a b' must be"),
    (_source("a", "s1", "share = 1", 'build_from = "org/x"\ndata_files = ["../y/*.parquet"]'),
     r"source 'a': data_files '\.\./y/\*\.parquet' must be a glob of paths inside the dataset repo"),
    (_source("a", "s1", "share = 1", 'build_from = "org/x"\ndata_files = 3'), r"data_files must be a glob or a list"),
    (_source("a", "s1", "share = 1", 'build_from = "org/x"\nhub_config = "a/b"'), r"config 'a/b' must be a config"),
    (_source("a", "s1", "share = 1", 'build_from = "./data"\nhub_config = "en"'),
     r"hub_config and data_files select the files of a hub dataset; build_from \./data is not a hub dataset id"),
])
def test_bad_mix_files_are_one_line_naming_the_file(tmp_path, body, message):
    with pytest.raises(ConfigError, match=message) as err:
        mixture.read_mix(_mix(tmp_path, body))
    assert "\n" not in str(err.value) and str(tmp_path / "mix.toml") in str(err.value)


def test_ten_thousand_sources_are_refused_before_anything_is_read(tmp_path):
    body = "".join(_source(f"s{i}", f"store{i}", "share = 0.0001") for i in range(10_000))
    with pytest.raises(ConfigError, match=r"10,000 sources; at most 64"):
        mixture.read_mix(_mix(tmp_path, body))


def test_tokens_become_shares_and_stores_resolve_beside_the_file(tmp_path):
    mix = mixture.read_mix(_mix(tmp_path, _source("a", "s1", "tokens = 3_000") + _source("b", "../s2", "tokens = 1_000",
                                                                                            'build_from = "hub/x"')))
    assert [s.share for s in mix.sources] == [0.75, 0.25]
    assert mix.sources[0].store == (tmp_path / "s1").resolve() and mix.sources[1].store == (tmp_path.parent / "s2").resolve()
    assert mix.sources[1].build_from == "hub/x" and mix.sources[0].max_passes == 1


@pytest.mark.slow
def test_a_mix_sources_hub_config_and_data_files_build_its_store_from_those_files(tmp_path, monkeypatch,
                                                                                   tiny_tokenizer):
    """Issue 59 item 3's leftover: a mix row's hub_config and data_files (a glob or a list) reach `corpus build
    --mix` (the store holds the selected file alone, its manifest says so) and the printed build command."""
    from biobench.api import corpus as api
    from biobench.training import corpus, token_store

    from tests.fake_hub import Repo, parquet_bytes, serving_hub

    tiny_tokenizer.save_pretrained(tmp_path / "tok")
    mix = _mix(tmp_path, _source("en", "stores/en", "share = 1", 'build_from = "org/corpus@refs/convert/parquet"\n'
                                 'hub_config = "en"\ndata_files = "en/train/0001.parquet"'))
    source = mixture.read_mix(mix).sources[0]
    assert source.selection == corpus.HubSelection("en", ("en/train/0001.parquet",))
    assert mixture.read_mix(mix).build_command(source, "tok").endswith(
        "--hub-config en --data-files en/train/0001.parquet")
    repo = Repo({f"en/train/000{i}.parquet": parquet_bytes({"text": [f"document {i} {j}" for j in range(5)]})
                 for i in range(2)})
    with serving_hub(monkeypatch, tmp_path) as hub:
        hub.datasets[("org/corpus", "refs/convert/parquet")] = repo
        assert [built for _, _, built in api.build_mix(mix, str(tmp_path / "tok"))] == [True]
    store = token_store.open_store(tmp_path / "stores" / "en")
    assert store.manifest["hub"]["org/corpus"]["paths"] == ["en/train/0001.parquet"] and store.n_documents == 5


@pytest.mark.parametrize("shares", [[0.6, 0.2, 0.2], [0.7, 0.2, 0.04, 0.06], [0.999, 0.001], [1 / 3] * 3])
def test_greedy_blend_keeps_every_source_within_one_sequence_of_its_share(shares):
    total = 20_000
    source_of, index_in = mixture.blend(shares, total)
    onehot = np.eye(len(shares), dtype=np.int64)[source_of]
    taken = np.cumsum(onehot, axis=0)  # sequences of each source after each position
    target = np.outer(np.arange(1, total + 1), shares)
    assert np.abs(taken - target).max() <= 1.0  # Megatron's rule: within one sequence at every step
    for s in range(len(shares)):  # each source's sequences are taken in order 0, 1, 2, ...
        assert index_in[source_of == s].tolist() == list(range(int((source_of == s).sum())))


@pytest.mark.parametrize("shares", [[0.6, 0.2, 0.15, 0.05], [0.7, 0.2, 0.04, 0.06], [0.999, 0.001], [1 / 3] * 3,
                                    [0.5, 0.5], [0.25] * 4])
def test_blend_counts_are_the_blends_counts_at_every_length(shares):
    """The counts-only path (what the plan table reads) gives the per-position order's counts exactly."""
    source_of, _ = mixture.blend(shares, 5_000)
    for upto in (1, 2, 3, 7, 100, 999, 4_321, 5_000):
        assert mixture.blend_counts(shares, upto) == np.bincount(source_of[:upto], minlength=len(shares)).tolist()


@pytest.mark.slow
def test_corpus_plan_builds_its_table_without_the_per_position_order(tmp_path, capsys, monkeypatch):
    """`corpus plan` of a 4-source mix at 8,192 tokens a sequence never builds the loader's per-position order
    (blend: two arrays of every position; 55 MB at 50B tokens): its table is counted by blend_counts, holding a
    few numbers, and is the table the order gives (what pretrain prints, having built the order)."""
    from biobench import cli

    sizes = {"lit": 35_000_000, "clin": 10_000_000, "e3c": 1_000_000, "web": 3_000_000}
    body = ""
    for (name, tokens), share in zip(sizes.items(), (0.6, 0.2, 0.15, 0.05), strict=True):
        fake_token_store(tmp_path / name, tokens)
        body += _source(name, name, f"share = {share}", "max_passes = 1000")
    mix = _mix(tmp_path, body)
    run = ["--tokens", "1B", "--seq-len", "8192", "--batch-size", "8", "--decay-ratio", "0.25"]

    def refused(*args, **kwargs):
        raise AssertionError("corpus plan built the per-position order")

    real_blend = mixture.blend
    monkeypatch.setattr(mixture, "blend", refused)
    assert cli.main(["corpus", "plan", str(mix), *run]) == 0
    table = capsys.readouterr().out
    positions = int(table.split(" sequences x ")[0].split(": ")[-1].replace(",", ""))
    assert positions == 152_576  # 15,258 phase-1 steps of 8 sequences (1B / 8,192), 3,814 decay steps
    monkeypatch.setattr(mixture, "blend", real_blend)
    stores = [token_store.open_store(tmp_path / name, verify=False) for name in sizes]
    read = mixture.read_mix(mix)
    streams, dedup = mixture.source_streams(read, stores)
    planned = mixture.plan_run(read, [len(t) for t, _, _ in streams], 1_000_000_000, 8, 8192, 0.25, dedup)
    planned.order()  # as pretrain does before printing it
    assert planned.table() + "\n" == table


def test_corpus_plan_prints_the_table_and_names_a_short_source(tmp_path, capsys):
    from biobench import cli

    fake_token_store(tmp_path / "lit", 7_000_000)
    fake_token_store(tmp_path / "mimic", 500_000)
    mix = _mix(tmp_path, _source("lit", "lit", "share = 0.8") +
               _source("mimic", "mimic", "share = 0.2", "max_passes = 3"))
    run = ["--seq-len", "1000", "--batch-size", "10", "--decay-ratio", "0.25"]  # 640 + 160 steps of 10 sequences
    assert cli.main(["corpus", "plan", str(mix), "--tokens", "6.4M", *run]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == ("mix mix.toml: 8,000 sequences x 1,000 tokens = 8,000,000 tokens read (640 phase-1 + 160 "
                        "decay steps of 10 sequences)")
    lit = next(line for line in lines if line.startswith("lit "))
    assert "7,000,000" in lit and "0.914" in lit and "6,400,000" in lit and "80.00%" in lit
    assert captured.err.strip() == ("mix source 'mimic' cannot fill its share of 20.00%: it needs 3.20 passes over "
                                    "its 500,000 tokens, max_passes is 3 (raise max_passes, lower its share, or add "
                                    "tokens)")
    assert cli.main(["corpus", "plan", str(mix), "--tokens", "5.6M", *run, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == ["lit", "mimic"] and rows[1]["passes"] == 2.8
    assert math.isclose(rows[1]["realised_share"], 0.2)


@pytest.mark.parametrize("name", ["paper-fr", "paper-en-10b", "paper-en-50b"])
def test_the_paper_mixes_parse(name):
    mix = mixture.read_mix(REPO / "examples" / "mixes" / f"{name}.toml")
    assert math.isclose(sum(s.share for s in mix.sources), 1.0)
    assert all(s.build_from for s in mix.sources)


def test_a_mixed_corpus_reads_each_source_at_its_share_as_a_pure_function_of_position(tmp_path):
    from biobench.training.packing import PackedCorpus

    a = PackedCorpus(np.arange(1000, dtype=np.uint16), np.array([0, 1000]), 10, 0, seed=1)  # ids 0..999
    b = PackedCorpus(np.arange(5000, 5050, dtype=np.uint16), np.array([0, 50]), 10, 0, seed=1)  # 5 sequences
    mix = mixture.Mix(tmp_path / "m.toml", (mixture.MixSource("a", tmp_path, 0.75, 1),
                                            mixture.MixSource("b", tmp_path, 0.25, 5)))
    plan = mixture.plan_mix(mix, [1000, 50], 80, 10)
    assert not plan.short() and plan.counts() == [60, 20]
    mixed = mixture.MixedCorpus([a, b], plan, seed=3)
    rows = [mixed.sequence_tokens(mixed.at(p)) for p in range(80)]
    from_b = [r for r in rows if r[0] >= 5000]
    assert len(from_b) == 20  # 4 passes over b's 5 sequences, each pass a permutation of them
    for k in range(4):
        assert sorted(int(r[0]) for r in from_b[5 * k:5 * k + 5]) == [5000, 5010, 5020, 5030, 5040]
    again = mixture.MixedCorpus([a, b], mixture.plan_mix(mix, [1000, 50], 80, 10), seed=3)
    assert all(np.array_equal(again.sequence_tokens(again.at(p)), rows[p]) for p in (79, 0, 41, 7))
    batch = mixed.batch([0, 1, 2])
    assert batch["input_ids"].shape == (3, 10)



def test_each_pass_of_an_upsampled_source_reshuffles_its_documents_before_packing(tmp_path, tok_dir):
    """Issue 59 item 2: pass p of a source packs its documents in an order drawn from (seed, source, p), so two
    passes cut different sequences from the same documents (Megatron's per-epoch document index)."""
    from biobench.training.packing import PackedCorpus

    src = tmp_path / "small.jsonl"
    src.write_text("".join(json.dumps({"text": " ".join(["patient fièvre toux"] * (1 + i % 5)) + f" cas {i}"}) + "\n"
                           for i in range(30)))
    token_store.build([str(src)], tmp_path / "small", str(tok_dir))
    fake_token_store(tmp_path / "big", 100_000)
    mix = mixture.read_mix(_mix(tmp_path, _source("big", "big", "share = 0.5") +
                                _source("small", "small", "share = 0.5", "max_passes = 10")))
    stores = [token_store.open_store(s.store, verify=False) for s in mix.sources]  # "big" is sparse zeros
    streams = [mixture.source_stream(m, s) for m, s in zip(mix.sources, stores, strict=True)]
    steps1 = -(-7 * -(-len(streams[1][0]) // 16) // 12)  # the small source read ~3.5 times (and the decay: x1.5)
    plan = mixture.plan_run(mix, [len(t) for t, _, _ in streams], 16 * 8 * steps1, 8, 16, 0.5)
    assert not plan.short()
    parts = [PackedCorpus(t, o, 16, 0, seed=5, stream=s, groups=g) for s, (t, o, g) in enumerate(streams)]
    mixed = mixture.MixedCorpus(parts, plan, seed=5)
    n = parts[1].n_sequences
    by_pass: dict[int, list] = {}
    for position in range(plan.total_sequences):
        if plan.source_of[position] == 1:  # the small source's sequence read here: pass * n + place in the pass
            index = parts[1].at(int(plan.index_in[position]))
            assert np.array_equal(mixed.sequence_tokens(mixed.at(position)), parts[1].sequence_tokens(index))
            by_pass.setdefault(index // n, []).append((index, parts[1].sequence(index)))
    by_pass = {p: [row for _, row in sorted(rows, key=lambda r: r[0])] for p, rows in by_pass.items()}
    assert len(by_pass) >= 3 and all(len(by_pass[p]) == n for p in (0, 1))
    store = stores[1]
    documents = sorted(tuple(store.tokens[int(store.offsets[d]):int(store.offsets[d + 1])].tolist())
                       for d in range(store.n_documents))

    def cut(rows) -> tuple[set, list]:
        sequences = {tuple(ids[mask == 1].tolist()) for ids, mask, _ in rows}
        ids = np.concatenate([r[0][r[1] == 1] for r in rows])
        docs = np.concatenate([r[2][r[1] == 1] for r in rows])
        starts = np.flatnonzero(np.r_[True, docs[1:] != docs[:-1]])
        return sequences, sorted(tuple(chunk.tolist()) for chunk in np.split(ids, starts[1:]))

    first, second = cut(by_pass[0]), cut(by_pass[1])
    assert first[1] == second[1] == documents  # every document once per pass, whole
    assert first[0].isdisjoint(second[0]) or len(first[0] & second[0]) < n // 2  # other windows
    assert first[0] != second[0]
    # a pure function of (seed, source, pass): a fresh corpus reads the same, another seed does not
    again = [PackedCorpus(t, o, 16, 0, seed=5, stream=s, groups=g) for s, (t, o, g) in enumerate(streams)]
    other = mixture.MixedCorpus(again, plan, seed=5)
    assert all(np.array_equal(other.sequence_tokens(other.at(p)), mixed.sequence_tokens(mixed.at(p)))
               for p in range(plan.total_sequences))


def test_corpus_plan_says_token_counts_are_ratios_and_refuses_stores_of_two_tokenizers(tmp_path, capsys):
    """Issue 59 item 5: `tokens = 3000` is a ratio (the table says so), and stores of different tokenizers, which
    pretrain refuses, are refused by plan in one line naming both sources."""
    from biobench import cli

    fake_token_store(tmp_path / "a", 50_000)
    fake_token_store(tmp_path / "b", 50_000)
    fake_token_store(tmp_path / "c", 50_000, fingerprint="other")
    run = ["--tokens", "20K", "--seq-len", "100", "--batch-size", "10", "--decay-ratio", "0.1"]
    counts = _mix(tmp_path, _source("a", "a", "tokens = 3000") + _source("b", "b", "tokens = 1000"))
    assert cli.main(["corpus", "plan", str(counts), *run]) == 0
    out = capsys.readouterr().out
    assert "note: the sources' `tokens` (4,000 in all) are ratios, not counts" in out
    a = next(line for line in out.splitlines() if line.startswith("a "))
    assert "75.00%" in a and "16,500" in a  # 3000 / 4000 of the 220 sequences of 100 read (20 + 2 steps of 10)
    two = _mix(tmp_path, _source("a", "a") + _source("c", "c"))
    assert cli.main(["corpus", "plan", str(two), *run]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "source 'c' (store " in err and "another tokenizer than source 'a'" in err


def test_corpus_sample_decodes_the_sequences_a_store_run_reads(tmp_path, tok_dir, capsys):
    """Issue 59 item 6: `corpus sample STORE --position P --n N` shows the sequences pretrain reads there (the
    step, the pass, the decoded text), with the run's seed and per-pass shuffle."""
    from biobench import cli
    from biobench.training.config import config_defaults
    from biobench.training.packing import PackedCorpus
    from transformers import AutoTokenizer

    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": f"patient fièvre toux cas {i}"}) + "\n" for i in range(12)))
    store = token_store.open_store(token_store.build([str(src)], tmp_path / "store", str(tok_dir)))
    run = ["--tokens", "128", "--seq-len", "16", "--batch-size", "4", "--decay-ratio", "0.5"]
    assert cli.main(["corpus", "sample", str(tmp_path / "store"), "--tokenizer", str(tok_dir), *run, "--position", "13",
                     "--n", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    packed = PackedCorpus(store.tokens, store.offsets, 16, 0, seed=config_defaults()["seed"])
    tok = AutoTokenizer.from_pretrained(tok_dir)
    n = packed.n_sequences
    assert out[0] == f"position 13 (step 3, source store, pass {13 // n}, 16 tokens):"
    assert out[1] == "  " + tok.decode(packed.sequence_tokens(packed.at(13)).tolist())
    assert out[2].startswith("position 14 (step 3, source store, pass ")
    assert cli.main(["corpus", "sample", str(src), "--tokenizer", str(tok_dir), *run]) == 2
    assert "corpus sample reads a token store or a mix file" in capsys.readouterr().err


def test_documents_shared_between_sources_are_read_from_the_first_source_only(tmp_path, tok_dir, capsys):
    """Issue 59 item 6: a mix compares its stores' document hashes; a document that an earlier source holds is
    left out of the later one (in `corpus plan`'s table and rows, and in what pretrain reads: source_streams),
    since upsampling would multiply it; a store built before hashes makes the counts unknown ('?')."""
    from biobench import cli
    from transformers import AutoTokenizer

    docs = [" ".join(["patient fièvre toux"] * (1 + i % 4)) + f" cas {i}" for i in range(50)]
    for name, part in (("lit", docs[:30] + docs[:2]), ("clin", docs[20:50])):  # lit repeats 2 of its own
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in part))
        token_store.build([str(tmp_path / f"{name}.jsonl")], tmp_path / name, str(tok_dir))
    many = "max_passes = 100"
    mix_file = _mix(tmp_path, _source("lit", "lit", "share = 0.5", many) + _source("clin", "clin", "share = 0.5", many))
    run = ["--tokens", "2000", "--seq-len", "16", "--batch-size", "4", "--decay-ratio", "0.5"]
    assert cli.main(["corpus", "plan", str(mix_file), *run, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["duplicates_dropped"], r["shared_dropped"]) for r in rows] == [(2, 0), (0, 10)]
    tok = AutoTokenizer.from_pretrained(tok_dir)

    def framed(texts: list[str]) -> list[int]:
        return [i for t in texts for i in [tok.cls_token_id, *tok(t, add_special_tokens=False)["input_ids"],
                                           tok.sep_token_id]]

    mix = mixture.read_mix(mix_file)
    streams, dedup = mixture.source_streams(mix, [token_store.open_store(s.store) for s in mix.sources])
    assert dedup == [{"duplicates_dropped": 2, "shared_dropped": 0}, {"duplicates_dropped": 0, "shared_dropped": 10}]
    clin = streams[1][0]
    assert clin[0:len(clin)].tolist() == framed(docs[30:50])  # docs 20-29 are read from 'lit' only
    assert rows[1]["available_tokens"] == len(clin) and rows[0]["available_tokens"] == len(framed(docs[:30]))
    assert cli.main(["corpus", "plan", str(mix_file), *run]) == 0
    table = capsys.readouterr().out
    assert "dups" in table and "shared" in table and "documents an earlier source holds, read there only" in table
    # a source whose every document an earlier one holds is refused in one line
    import shutil

    shutil.copytree(tmp_path / "lit", tmp_path / "copy")
    (tmp_path / "again.toml").write_text(_source("lit", "lit", "share = 0.5", many) + _source("copy", "copy", "share = 0.5", many))
    assert cli.main(["corpus", "plan", str(tmp_path / "again.toml"), *run]) == 2
    assert "mix source 'copy': every document of store" in capsys.readouterr().err
    # a store of format version 1 (no hashes) earlier in the mix: nothing is compared, the counts are unknown
    fake_token_store(tmp_path / "old", 100_000, token_store.open_store(tmp_path / "clin").fingerprint)
    (tmp_path / "old.toml").write_text(_source("old", "old", "share = 0.5") + _source("clin", "clin", "share = 0.5", many))
    assert cli.main(["corpus", "plan", str(tmp_path / "old.toml"), *run]) == 0
    out = capsys.readouterr().out
    assert "?: a store built before document hashes (dedup unknown: rebuild it)" in out


@pytest.mark.slow
def test_heldout_documents_never_appear_in_any_training_sequence_of_the_planned_run(tmp_path, tok_dir, capsys):
    """Issue 59 item 6: `--heldout-docs N` holds N documents of each source out of every pass of the run (a
    small source read ~8 times, each pass reshuffled), the same N whatever the seed; `corpus plan` counts them and
    plans the tokens that remain; every other document is read."""
    from biobench import cli
    from biobench.training.packing import PackedCorpus

    for name, n in (("lit", 40), ("clin", 12)):
        (tmp_path / f"{name}.jsonl").write_text("".join(
            json.dumps({"text": " ".join(["patient fièvre toux"] * (1 + i % 4)) + f" {name} cas {i}"}) + "\n"
            for i in range(n)))
        token_store.build([str(tmp_path / f"{name}.jsonl")], tmp_path / name, str(tok_dir))
    mix_file = _mix(tmp_path, _source("lit", "lit", "share = 0.5", "max_passes = 20")
                    + _source("clin", "clin", "share = 0.5", "max_passes = 20"))
    mix = mixture.read_mix(mix_file)
    stores = [token_store.open_store(s.store) for s in mix.sources]
    streams, dedup, held = mixture.split_sources(mix, stores, 3)
    assert [len(h) for h in held] == [3, 3] and all(np.all(np.diff(h) > 0) for h in held)
    again = mixture.split_sources(mix, [token_store.open_store(s.store) for s in mix.sources], 3)[2]
    assert all(np.array_equal(a, b) for a, b in zip(held, again, strict=True))  # a pure function: no seed, no rank
    assert not np.array_equal(mixture.heldout_documents(np.arange(40), 3, "lit"),
                              mixture.heldout_documents(np.arange(40), 3, "other"))  # keyed by the source's name
    for store, counts, h, (tokens, _, _) in zip(stores, dedup, held, streams, strict=True):
        lengths = store.offsets[1:] - store.offsets[:-1]
        assert counts["heldout_documents"] == 3 and counts["heldout_tokens"] == int(lengths[h].sum())
        assert len(tokens) == len(store.tokens) - counts["heldout_tokens"]
    run = ["--tokens", "3000", "--seq-len", "16", "--batch-size", "4", "--decay-ratio", "0.5"]
    assert cli.main(["corpus", "plan", str(mix_file), *run, "--heldout-docs", "3", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["available_tokens"], r["heldout_documents"]) for r in rows] == [(len(t), 3) for t, _, _ in streams]
    assert cli.main(["corpus", "plan", str(mix_file), *run, "--heldout-docs", "3"]) == 0
    assert "held out" in capsys.readouterr().out
    plan = mixture.plan_run(mix, [len(t) for t, _, _ in streams], 3000, 4, 16, 0.5, dedup)
    assert not plan.short()
    parts = [PackedCorpus(t, o, 16, 0, seed=7, stream=s, groups=g) for s, (t, o, g) in enumerate(streams)]
    mixed = mixture.MixedCorpus(parts, plan, seed=7)
    read: list[set[int]] = [set(), set()]
    passes = [0, 0]
    for position in range(plan.total_sequences):
        index = mixed.at(position)
        s = int(plan.source_of[index])
        j = parts[s].at(int(plan.index_in[index]))
        passes[s] = max(passes[s], j // parts[s].n_sequences + 1)
        _, mask, docs = parts[s].sequence(j)
        read[s] |= set(streams[s][0].documents[docs[mask == 1]].tolist())  # stream documents -> store documents
    assert min(passes) > 1  # the run reads each source more than once, every pass without the held-out documents
    for store, h, docs in zip(stores, held, read, strict=True):
        assert docs == set(range(store.n_documents)) - set(h.tolist())
        hashes = store.hashes()
        assert not set(hashes[h].tolist()) & set(hashes[sorted(docs)].tolist())
    # unset (0), nothing changes: the sources read their stores as before
    plain, plain_dedup = mixture.source_streams(mix, stores)
    assert plain[0][0] is stores[0].tokens and "heldout_documents" not in plain_dedup[0]
    with pytest.raises(ConfigError, match=r"mix source 'clin': --heldout-docs 12 holds out all of its 12 document"):
        mixture.split_sources(mix, stores, 12)
