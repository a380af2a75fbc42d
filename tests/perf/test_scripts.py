"""Smoke tests of the performance scripts: importable, argument parsing and the shared helpers. The real
measurements are runs of the scripts (docs/performance.md), never timed tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "TOKENIZERS_PARALLELISM")


def test_finetune_speed_arguments():
    from biobench.perf import finetune_speed

    args = finetune_speed.parse_args(["--quick", "--tasks", "ncbi-disease,gad", "--threads", "1"])
    setups = finetune_speed.setups(args)
    assert [s["task"] for s in setups] == ["ncbi-disease", "gad"]
    assert setups[0]["limits"] == {"train": 1000, "dev": 300, "test": 300}
    assert setups[0]["epochs"] == 1 and setups[0]["threads"] == 1
    full = finetune_speed.setups(finetune_speed.parse_args([]))[0]
    assert full["limits"] == {"train": None, "dev": None, "test": None}
    with pytest.raises(SystemExit):
        finetune_speed.parse_args(["--arms", "biobench,keras"])


def test_pretrain_and_scaling_arguments():
    from biobench.perf import pretrain_speed, scaling

    quick = pretrain_speed.parse_args(["--quick"])
    assert (quick.steps, quick.warmup_steps, quick.seq_len) == (5, 1, 1024)
    with pytest.raises(SystemExit):
        pretrain_speed.parse_args(["--steps", "2", "--warmup-steps", "2"])
    assert scaling.parse_args(["--quick"]).lengths == [512, 1024, 2048]
    assert scaling.parse_args([]).lengths == [512, 1024, 2048, 4096, 8192]
    with pytest.raises(SystemExit):
        scaling.parse_args(["--modes", "mlm,rlhf"])


def test_word_tags_and_spans_round_trip():
    from biobench.perf.finetune_speed import tags_to_spans, word_tags
    from biobench.tasks.schema import Entity, NerExample

    text = "Familial breast cancer and ataxia"
    tokens = ((0, 8), (9, 15), (16, 22), (23, 26), (27, 33))
    ex = NerExample("s1", text, (Entity(0, 22, "Disease"), Entity(27, 33, "Disease")), tokens)
    words, tags = word_tags(ex)
    assert words == ["Familial", "breast", "cancer", "and", "ataxia"]
    assert tags == ["B-Disease", "I-Disease", "I-Disease", "O", "B-Disease"]
    assert tags_to_spans(ex, tags) == [[0, 22, "Disease"], [27, 33, "Disease"]]


def test_mfu_report_uses_the_training_formula():
    from types import SimpleNamespace

    from biobench.perf.perf_common import mfu_report
    from biobench.training import flops

    config = SimpleNamespace(num_hidden_layers=3, hidden_size=10, global_attn_every_n_layers=3, local_attention=4)
    out = mfu_report(n_params=1000, config=config, seq_len=100, tokens_per_s=2.0, peak_flops=1e6)
    assert out["mfu"] == flops.mfu(1000, config, 100, 2.0, 1e6)
    assert out["mfu"] == pytest.approx((6000 + 12960) * 2 / 1e6)
    assert out["flops_per_token"] == 6000 + 12960
    assert out["mfu_dense_attention"] == pytest.approx((6000 + 12 * 3 * 10 * 100) * 2 / 1e6)


def test_finish_prints_ratio_last_and_writes_json(tmp_path, capsys, monkeypatch):
    from biobench.perf import perf_common
    from biobench.perf.perf_common import PeakMemory, finish, print_table

    monkeypatch.setattr(perf_common, "ARM_WINDOWS", [])  # no arm measured: no disturbance flag

    with PeakMemory("cpu") as memory:
        blob = bytearray(50 * 2**20)
        blob[::4096] = b"x" * len(blob[::4096])
    assert memory.peak_mb >= memory.start_mb
    print_table([{"arm": "a", "x": 1.5}], [("arm", "arm", ""), ("x", "x", ".2f")])
    assert finish({"memory": memory.to_dict()}, tmp_path / "r.json", 1.234) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1] == "ratio: 1.23"
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["ratio"] == 1.234 and saved["memory"]["kind"] == "process_rss"
    assert finish({}, None, None) == 1


def test_generated_corpus_and_vocab_spec(tmp_path):
    from biobench.perf.perf_common import VocabSpec
    from biobench.perf.pretrain_speed import documents, generated_corpus

    docs = documents(str(generated_corpus(tmp_path / "c.jsonl.gz", n_docs=30)), None)
    assert len(docs) == 30 and min(len(d.split()) for d in docs) >= 20
    assert docs == documents(str(generated_corpus(tmp_path / "d.jsonl.gz", n_docs=30)), None)  # seeded
    assert len(VocabSpec(50368)) == 50368


PERF_SCRIPTS = ["finetune_speed", "pretrain_speed", "scaling", "span_head_speed", "parallel_speed"]


@pytest.mark.parametrize("script", PERF_SCRIPTS)
def test_scripts_run_as_modules(script):
    """`python -m biobench.perf.<script> --help` works: the documented way to run them."""
    done = subprocess.run([sys.executable, "-m", f"biobench.perf.{script}", "--help"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "--quick" in done.stdout and "--out" in done.stdout


def test_importing_the_scripts_leaves_the_environment_alone():
    """Offline variables are set by main(), not on import: importing a script from a notebook or a test
    must not switch the caller's session offline."""
    code = ("import os; before = dict(os.environ); "
            "import biobench.perf.perf_common, biobench.perf.finetune_speed, biobench.perf.pretrain_speed, "
            "biobench.perf.scaling, biobench.perf.pipeline_speed, biobench.perf.parallel_speed; "
            "changed = {k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)}; "
            "print(sorted(changed))")
    env = {k: v for k, v in os.environ.items() if k not in OFFLINE_VARIABLES}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_offline_environment_sets_only_what_the_user_left_unset(monkeypatch):
    from biobench.perf.perf_common import offline_environment

    for name in OFFLINE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    offline_environment()
    assert os.environ["HF_HUB_OFFLINE"] == "0"  # the user's value wins
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1" and os.environ["TOKENIZERS_PARALLELISM"] == "false"


def test_data_paths_come_from_flags_or_biobench_data(tmp_path, monkeypatch):
    from biobench.perf import finetune_speed, pretrain_speed

    # the generated fallback corpus is checked in test_generated_corpus_and_vocab_spec; here only which path is
    # chosen (the default 2,000-document corpus took most of this test's time)
    monkeypatch.setattr(pretrain_speed, "generated_corpus", lambda path: path)
    monkeypatch.setenv("BIOBENCH_DATA", str(tmp_path / "root"))
    assert finetune_speed.setups(finetune_speed.parse_args([]))[0]["data_dir"] == str(tmp_path / "root")
    assert finetune_speed.setups(finetune_speed.parse_args(["--data-dir", "/x"]))[0]["data_dir"] == "/x"
    (tmp_path / "root" / "pretrain-fr").mkdir(parents=True)
    assert pretrain_speed.default_corpus(tmp_path / "gen.jsonl.gz") == str(tmp_path / "root" / "pretrain-fr")
    monkeypatch.delenv("BIOBENCH_DATA")
    # a project-style shared/data folder beside the working directory is not a default: only flags and
    # BIOBENCH_DATA choose data
    (tmp_path / "work" / "shared" / "data" / "pretrain-fr").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "work")
    assert finetune_speed.setups(finetune_speed.parse_args([]))[0]["data_dir"] is None
    assert pretrain_speed.default_corpus(tmp_path / "gen.jsonl.gz") == str(tmp_path / "gen.jsonl.gz")


def test_gpu_check_script_is_valid_bash_and_stops_on_a_missing_argument(tmp_path):
    script = REPO / "bench" / "perf" / "gpu_check.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode != 0 and "usage: bench/perf/gpu_check.sh OUTDIR" in done.stderr


def test_pipeline_speed_runs_small(tmp_path):
    from biobench.perf import pipeline_speed

    out = tmp_path / "p.json"
    result = pipeline_speed.main(["--seq-len", "256", "--batch", "16", "--micro", "4", "--vocab", "1000",
                                  "--baseline-rows", "8", "--repeats", "1", "--out", str(out)])
    assert set(result["median_tokens_per_s"]) == {"biobench", "row-by-row"}
    assert all(v > 0 for v in result["median_tokens_per_s"].values())
    assert json.loads(out.read_text())["ratio"] == pytest.approx(result["ratio"])


def test_parallel_speed_arms_and_speedups():
    """The arms' setups, their runs/hour against --parallel 1, and the prediction check."""
    from biobench.perf import parallel_speed

    args = parallel_speed.parse_args(["--quick", "--arms", "1,2,auto", "--device", "cpu"])
    assert args.arm_values == [1, 2, "auto"] and args.limit_train == 100 and args.seeds == "1-2"
    setup = parallel_speed.arm_setup(args, 2, threads=2)
    assert setup["tasks"] == ["gad", "ncbi-disease"] and setup["parallel"] == 2 and setup["limit_eval"] == 100
    assert setup["overrides"] == {"epochs": 1, "limit_train": 100, "max_length": 64}
    with pytest.raises(SystemExit):
        parallel_speed.parse_args(["--arms", "1,0"])
    arm = lambda n, wall, preds: {"parallel": n, "rc": 0, "wall_s": wall, "runs": 8,  # noqa: E731
                                  "runs_per_hour": 8 / wall * 3600, "predictions": preds, "chosen": ""}
    rows = parallel_speed.summarize({"1": [arm(1, 100, {"a": "x"})], "2": [arm(2, 50, {"a": "x"})],
                                     "4": [arm(4, 80, {"a": "y"})]}, threads=2)
    by = {r["parallel"]: r for r in rows}
    assert by["2"]["speedup"] == pytest.approx(2.0) and by["4"]["speedup"] == pytest.approx(1.25)
    assert by["2"]["predictions_identical_to_1"] and not by["4"]["predictions_identical_to_1"]
    assert by["2"]["threads_per_run"] == 1 and by["4"]["threads_per_run"] == 1  # 4 runs share 2 threads: 1 each


def _stat(busy: int, idle: int, iowait: int = 0) -> str:
    """A /proc/stat text whose `cpu` line has `busy` user ticks and the given idle/iowait (other fields 0)."""
    return (f"cpu  {busy} 0 0 {idle} {iowait} 0 0 0 7 0\ncpu0 {busy} 0 0 {idle} {iowait} 0 0 0 0 0\n"
            "intr 1 2 3\n")


def _clock(readings: list[str], cpu: list[float], wall: list[float], cores: int = 2):
    from biobench.perf.perf_common import ArmClock, proc_stat_ticks

    texts, cpus, walls = iter(readings), iter(cpu), iter(wall)
    clock = ArmClock(ticks=lambda: proc_stat_ticks(next(texts)), cpu=lambda: next(cpus),
                     clock=lambda: next(walls), cores=cores, hz=100)
    with clock:
        pass
    return clock.window


def test_proc_stat_ticks_reads_the_cpu_line():
    from biobench.perf.perf_common import proc_stat_ticks

    assert proc_stat_ticks("cpu  10 2 3 100 5 1 1 0 4 0\n") == (17, 122)  # guest (4) is inside user already
    assert proc_stat_ticks("intr 1\n") is None


def test_an_arm_alone_on_the_machine_is_not_flagged():
    # 10 s on 2 cores; the machine was busy 10.5 CPU-s, the arm itself used 10 CPU-s: others 0.5/20 = 2.5%
    window = _clock([_stat(0, 0), _stat(1050, 950)], cpu=[1.0, 11.0], wall=[0.0, 10.0])
    assert window.others_share == pytest.approx(0.025)
    assert not window.disturbed and window.flag == ""


def test_an_arm_beside_a_busy_neighbour_is_flagged():
    from biobench.perf.perf_common import DISTURBED_SHARE, disturbance_summary

    # the machine was busy 18 CPU-s of 20 while the arm used 8: others used 10/20 = 50% of the cores
    busy = _clock([_stat(500, 0), _stat(2300, 200)], cpu=[0.0, 8.0], wall=[5.0, 15.0])
    assert busy.others_share == pytest.approx(0.5) and busy.disturbed
    assert busy.flag == "DISTURBED (others used 50% of 2 cores)"
    assert busy.to_dict()["disturbed"] is True and busy.to_dict()["machine_busy_s"] == 18.0
    # just under and just over the threshold (iowait counts as idle)
    under = _clock([_stat(0, 0), _stat(int(200 * DISTURBED_SHARE) - 1, 0, 50)], cpu=[0.0, 0.0], wall=[0.0, 1.0])
    over = _clock([_stat(0, 0), _stat(int(200 * DISTURBED_SHARE) + 1, 0, 50)], cpu=[0.0, 0.0], wall=[0.0, 1.0])
    assert not under.disturbed and over.disturbed
    quiet = _clock([_stat(0, 0), _stat(100, 100)], cpu=[0.0, 1.0], wall=[0.0, 1.0])
    assert disturbance_summary([("a", quiet)]) == ""
    assert disturbance_summary([("a", quiet), ("b", busy)]) == "DISTURBED: 1 of 2 arms (others' share of the cores: b 50%)"
    unknown = _clock(["", ""], cpu=[0.0, 1.0], wall=[0.0, 1.0])  # no /proc/stat: never flagged, said so
    assert unknown.others_share is None and not unknown.disturbed and "unknown" in unknown.flag


def test_arms_alternate_and_report_medians(monkeypatch, capsys):
    from biobench.perf import perf_common

    assert perf_common.alternating(["a", "b"], 3) == ["a", "b", "b", "a", "a", "b"]
    values = iter([3.0, 10.0, 20.0, 1.0, 2.0, 30.0])
    calls = []

    def run(arm):
        calls.append(arm)
        return {"rate": next(values), "cpu": {"others_share": 0.4 if len(calls) == 2 else 0.0, "cores": 2,
                                              "disturbed": len(calls) == 2}}

    out = perf_common.run_arms(["a", "b"], run, 3, "rate")
    assert calls == ["a", "b", "b", "a", "a", "b"]
    assert out["a"]["rate"] == 2.0 and out["a"]["rate_all"] == [3.0, 1.0, 2.0]
    assert out["b"]["rate"] == 20.0 and out["b"]["disturbed_runs"] == 1
    assert "b: rate 10.00 DISTURBED (others used 40% of 2 cores)" in capsys.readouterr().out


def test_finish_prints_the_flag_beside_the_ratio(monkeypatch, capsys):
    from biobench.perf import perf_common

    busy = _clock([_stat(0, 0), _stat(200, 0)], cpu=[0.0, 0.0], wall=[0.0, 1.0])
    monkeypatch.setattr(perf_common, "ARM_WINDOWS", [("cold", busy)])
    report: dict = {}
    perf_common.finish(report, None, 2.0)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-2].startswith("load average: ")
    assert lines[-1] == "ratio: 2.00  DISTURBED: 1 of 1 arms (others' share of the cores: cold 100%)"
    assert report["disturbance"]["arms"][0]["arm"] == "cold" and report["disturbance"]["arms"][0]["disturbed"]


def test_run_isolated_adds_the_arms_window(monkeypatch):
    from biobench.perf import perf_common

    monkeypatch.setattr(perf_common, "ARM_WINDOWS", [])
    out = perf_common.run_isolated(dict, isolate=False, arm_name="x", a=1)
    assert out["a"] == 1 and set(out["cpu"]) >= {"own_cpu_s", "machine_busy_s", "others_share", "disturbed"}
    assert [name for name, _ in perf_common.ARM_WINDOWS] == ["x"]


def test_corpus_speed_arguments():
    from biobench.perf import corpus_speed

    args = corpus_speed.parse_args(["--tokens", "10M", "1B"])
    assert args.sizes == [10_000_000, 1_000_000_000] and args.plan_tokens == "50B"
    assert (args.repeats, args.dedup_size) == (3, 200_000_000)
    quick = corpus_speed.parse_args(["--quick"])
    assert (quick.sizes, quick.loader_steps, quick.plan_tokens) == ([200_000], 2, "1B")
    assert (quick.repeats, quick.dedup_size) == (1, 200_000)  # the costs on the quick store itself
    assert corpus_speed.parse_args(["--repeats", "5", "--dedup-tokens", "0"]).dedup_size == 0
    with pytest.raises(SystemExit):
        corpus_speed.parse_args(["--repeats", "0"])


@pytest.mark.slow
def test_corpus_speed_quick_reports_medians_cpu_and_the_dedup_and_reshuffle_costs(tmp_path, tiny_tokenizer, capsys):
    """Issue 59's measured section: each timed figure the median of --repeats runs with its CPU seconds per
    million tokens, `uptime`'s load average before and after, and the dedup and per-pass reshuffle costs."""
    from biobench.perf import corpus_speed

    tiny_tokenizer.save_pretrained(tmp_path / "tok")
    assert corpus_speed.main(["--quick", "--repeats", "2", "--tokenizer", str(tmp_path / "tok"), "--tmp",
                              str(tmp_path), "--out", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    scale = report["scaling"]
    assert scale["repeats"] == 2 and scale["ratio"] > 0 and scale["two_workers_workers_cpu_s_per_m_tokens"] > 0
    assert scale["one_worker_workers_cpu_s_per_m_tokens"] < scale["one_worker_parent_cpu_s_per_m_tokens"]
    assert [(r["loader_workers"], r["runs"]) for r in report["loader"]] == [(0, 2), (2, 2)]
    assert all(r["cpu_s_per_m_tokens"] >= 0 for r in report["loader"]) and report["plan"]["runs"] == 2
    dedup, shuffle = report["dedup"], report["reshuffle"]
    assert dedup["tokens"] == shuffle["tokens"] == report["builds"][0]["tokens"]
    assert dedup["documents"] == shuffle["documents"] > 0 and 0 < dedup["share_of_build_cpu"] < 1
    assert shuffle["sequences"] == -(-shuffle["tokens"] // 8192) and shuffle["order_cpu_s"] >= 0
    assert report["load_average_before"] and report["load_average_after"]
    out = capsys.readouterr().out
    assert out.startswith("load average before (uptime): ") and "load average after (uptime): " in out
    assert "dedup, " in out and "per-pass reshuffle, " in out and "median of 2" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "tok"]


@pytest.mark.slow
def test_corpus_speed_memory_only_runs_end_to_end(tmp_path, tiny_tokenizer, capsys):
    """--memory-only with --build-workers 2: one line per size (prefixes of one generated corpus), the report's
    rows with the building process's and the largest worker's peak RSS and the memory opening the store took."""
    from biobench.perf import corpus_speed

    tiny_tokenizer.save_pretrained(tmp_path / "tok")
    assert corpus_speed.main(["--memory-only", "--tokens", "100K", "3M", "--build-workers", "2", "--tokenizer",
                              str(tmp_path / "tok"), "--tmp", str(tmp_path), "--out", str(tmp_path / "r.json")]) == 0
    rows = json.loads((tmp_path / "r.json").read_text())["builds"]
    assert len(rows) == 2 and rows[0]["tokens"] < rows[1]["tokens"] and rows[1]["shards"] >= 1
    assert all(r["peak_rss_mb"] > 0 and r["open_rss_mb"] < 50 for r in rows)
    out = capsys.readouterr().out
    assert out.count("2 worker(s)") == 2 and "opening the store: +" in out and "load average" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "tok"]  # the corpora and stores are removed


def test_ner_learning_curve_table_reads_runs_selected_on_any_dev_metric(tmp_path, capsys):
    """A run selected on macro-F1 has no dev_<metric> key besides dev_macro_f1: its selection score is that one
    (the table raised a TypeError on such a file); a step one file lacks is '-'."""
    from biobench.perf import ner_learning_curve

    micro, macro = tmp_path / "micro.jsonl", tmp_path / "macro.jsonl"
    rows = [{"step": 100, "head": "span", "dev_micro_f1": 0.5, "dev_macro_f1": 0.4, "test_macro_f1": 0.3},
            {"step": 200, "head": "span", "dev_micro_f1": 0.6, "dev_macro_f1": 0.5, "test_macro_f1": 0.45}]
    micro.write_text("".join(json.dumps(row) + "\n" for row in rows))
    macro.write_text(json.dumps({"step": 100, "head": "hf-token", "dev_macro_f1": 0.25, "test_macro_f1": 0.2}) + "\n")
    ner_learning_curve.table([str(micro), str(macro)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| step | span dev sel / dev F1 / test F1 | hf-token dev sel / dev F1 / test F1 |"
    assert lines[2] == "| 100 | 50.0 / 40.0 / 30.0 | 25.0 / 25.0 / 20.0 |"
    assert lines[3] == "| 200 | 60.0 / 50.0 / 45.0 | - |"


def test_time_bounds_measures_every_bound_the_tests_once_held(capsys):
    """Issue 61 item 1: the bounds left the tests for this script; each row is measured and judged."""
    from biobench.perf import time_bounds

    assert time_bounds.main(["--models", "4", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    for name in time_bounds.BOUNDS_S:
        assert any(line.strip().startswith(name) and line.split()[-1] in ("within", "OVER")
                   for line in out.splitlines()), (name, out)
    assert out.strip().splitlines()[-1].startswith("ratio: ")
