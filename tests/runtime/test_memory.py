"""A model's memory is estimated from its config.json before it is built (bench/runtime/memory.py), and what
cannot fit — the device, the operator's --max-model-gb, or weights the config does not describe — is refused
in one line: by eval, by pretrain and by the queue worker before a request runs (issue 40)."""

from __future__ import annotations

import json

import pytest
from biobench import cli
from biobench.errors import ModelLoadError
from biobench.runtime import memory

from tests import hostile_corpus as hc

TINY = {
    "bert": dict(vocab_size=1000, hidden_size=64, num_hidden_layers=3, intermediate_size=128, num_attention_heads=4,
                 max_position_embeddings=128, type_vocab_size=2),
    "roberta": dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, intermediate_size=96, num_attention_heads=4,
                    max_position_embeddings=130, type_vocab_size=1),
    "camembert": dict(vocab_size=900, hidden_size=32, num_hidden_layers=2, intermediate_size=64,
                      num_attention_heads=4, max_position_embeddings=66, type_vocab_size=1),
    "xlm-roberta": dict(vocab_size=900, hidden_size=32, num_hidden_layers=2, intermediate_size=64,
                        num_attention_heads=4, max_position_embeddings=66, type_vocab_size=1),
    "electra": dict(vocab_size=900, embedding_size=16, hidden_size=32, num_hidden_layers=2, intermediate_size=64,
                    num_attention_heads=4, max_position_embeddings=66),
    "distilbert": dict(vocab_size=1000, dim=64, n_layers=2, hidden_dim=128, n_heads=4, max_position_embeddings=128),
    "modernbert": dict(vocab_size=1000, hidden_size=64, num_hidden_layers=3, intermediate_size=96,
                       num_attention_heads=4, pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1,
                       sep_token_id=2),
}


@pytest.mark.parametrize("kind", [*TINY, "modernbert-biases"])
def test_the_estimate_is_the_parameter_count_of_the_model_built_from_the_config(kind):
    from transformers import AutoConfig, AutoModel

    extra = {"attention_bias": True, "mlp_bias": True, "norm_bias": True} if kind == "modernbert-biases" else {}
    model_type = kind.removesuffix("-biases")
    config = AutoConfig.for_model(model_type, **TINY[model_type], **extra)
    built = sum(p.numel() for p in AutoModel.from_config(config).parameters())
    estimate = memory.estimate_params(config.to_dict())
    assert (estimate.params, estimate.exactness) == (built, "exact")


def test_the_estimate_of_minilm_is_its_parameter_count():
    from transformers import AutoModel

    folder = hc.minilm_folder()
    built = sum(p.numel() for p in AutoModel.from_pretrained(str(folder)).parameters())
    estimate = memory.estimate_params(json.loads((folder / "config.json").read_text()))
    assert estimate.params == built == 22_713_216


def test_other_architectures_get_a_lower_bound_or_no_estimate():
    bound = memory.estimate_params({"model_type": "mystery", "vocab_size": 1000, "hidden_size": 64,
                                    "num_hidden_layers": 2, "intermediate_size": 128})
    assert bound.exactness == "lower bound" and bound.params == 1000 * 64 + 2 * (4 * 64 * 64 + 2 * 64 * 128)
    unknown = memory.estimate_params({"model_type": "t5", "d_model": 512})
    assert unknown.params is None and "not estimated" in unknown.note
    assert memory.check_model_memory({"model_type": "t5"}, "x", "cpu", limit_gb=1e-9).params is None


@pytest.mark.parametrize("value", [-5, "big", 1.5, float("inf"), True, [3]])
def test_a_config_value_that_is_not_a_whole_number_is_one_line(value):
    with pytest.raises(ModelLoadError, match="is not a whole number"):
        memory.estimate_params({**TINY["bert"], "model_type": "bert", "hidden_size": value}, "m/config.json")


def test_refusals_name_the_limit_the_device_and_the_weights(monkeypatch):
    config = {**TINY["bert"], "model_type": "bert", "vocab_size": 30_000_000}  # 1.9e9 parameters, 7.7 GB float32
    with pytest.raises(ModelLoadError, match=r"over this machine's limit of 2 GB \(--max-model-gb"):
        memory.check_model_memory(config, "m", "cpu", limit_gb=2)
    monkeypatch.setenv(memory.LIMIT_ENV, "3")
    with pytest.raises(ModelLoadError, match="limit of 3 GB"):
        memory.check_model_memory(config, "m", "cpu")
    monkeypatch.delenv(memory.LIMIT_ENV)
    monkeypatch.setattr(memory, "available_ram", lambda: 10 * memory.GB)
    with pytest.raises(ModelLoadError, match=r"to fine-tune it needs about 38.4 GB .* 10.0 GB of RAM"):
        memory.check_model_memory(config, "m", "cpu")  # 16 bytes a parameter to train, 4 for the pristine copy
    monkeypatch.setattr(memory, "available_ram", lambda: 5 * memory.GB)
    with pytest.raises(ModelLoadError, match="to load it needs about 7.7 GB"):
        memory.check_model_memory(config, "m", "cpu", training=False)
    monkeypatch.setattr(memory, "cuda_memory_smi", lambda device: 80 * memory.GB)
    with pytest.raises(ModelLoadError, match="needs about 7.7 GB and this machine has 5.0 GB of RAM"):
        memory.check_model_memory(config, "m", "cuda:0", use_torch=False)  # 31 GB to train fit; the RAM copy not
    monkeypatch.setattr(memory, "available_ram", lambda: 1000 * memory.GB)
    with pytest.raises(ModelLoadError, match=r"needs about 122.9 GB \(weights, gradients.*cuda:0 has 80.0 GB"):
        memory.check_model_memory({**config, "vocab_size": 120_000_000}, "m", "cuda:0", use_torch=False)
    with pytest.raises(ModelLoadError, match="does not describe these weights"):
        memory.check_model_memory(config, "m", "cpu", weight_bytes=90_000_000)
    small = memory.check_model_memory(TINY["bert"] | {"model_type": "bert"}, "m", "cpu", weight_bytes=700_000)
    assert small.params == 177_024


def test_model_configs_end_in_one_line_before_the_model_is_built(tmp_path, capsys, monkeypatch):
    import resource

    monkeypatch.delenv(memory.LIMIT_ENV, raising=False)
    for what, argv, phrase, env in hc.model_config_cases(tmp_path):
        with monkeypatch.context() as patch:
            for key, value in env.items():
                patch.setenv(key, value)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            rc = cli.main(argv)
        out, err = capsys.readouterr()
        lines = (out + err).strip().splitlines()
        assert rc != 0 and len(lines) == 1 and lines[0].startswith("error: ") and phrase in lines[0], (what, lines)
        assert "Traceback" not in out + err, what  # its time: bench/perf/time_bounds.py's `model configs` row
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 500_000, what  # KiB: nothing allocated
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("seed-*.json"))  # no result


def test_a_config_whose_weights_differ_is_one_line_not_a_traceback(tmp_path):
    from biobench.eval.encoder import load_encoder

    folder = hc.model_with_config(tmp_path / "m", vocab_size=200_000)  # fits the weights' size, not their shapes
    with pytest.raises(ModelLoadError, match="weights' shapes differ from what its config.json describes"):
        load_encoder(str(folder))


def test_pretrain_refuses_a_model_too_big_before_building_it(tmp_path):
    from biobench.training import loading

    folder = hc.model_with_config(tmp_path / "m", num_hidden_layers=100_000)
    with pytest.raises(ModelLoadError, match="over 1,000"):
        loading.load(str(folder), recipe_name="mlm", needs_causal=False, attn="sdpa")
    with pytest.raises(ModelLoadError, match="limit of 0.01 GB"):
        loading.load(str(hc.minilm_folder()), recipe_name="mlm", needs_causal=False, attn="sdpa", max_model_gb=0.01)


def test_the_worker_fails_a_request_whose_model_is_too_big_and_serves_the_next(tmp_path):
    from biobench.service import queue as q
    from biobench.service.queue_storage import FolderStorage

    from tests.support import drain

    big = hc.model_with_config(tmp_path / "big", vocab_size=2e9)
    root = tmp_path / "queue"
    (root / "requests").mkdir(parents=True)
    (root / "requests" / "big.json").write_text(json.dumps(hc.good_request("big", "2025-01-01T00:00:00Z",
                                                                           model=str(big))))
    (root / "requests" / "good-1.json").write_text(json.dumps(hc.good_request("good-1")))
    lines = drain(FolderStorage(root), tmp_path, tmp_path / "ran.txt")
    status = {r.id: r for r in q.list_requests(FolderStorage(root))}
    assert (tmp_path / "ran.txt").read_text().split() == ["good-1"] and status["good-1"].status == "finished"
    refused = status["big"]
    assert refused.status == "failed" and refused.attempts == 0 and refused.started_at is None  # never running
    assert len(refused.log_tail) == 1 and "does not describe these weights" in refused.log_tail[0]
    assert str(tmp_path) not in refused.log_tail[0]  # a public queue shows no server path
    assert [line for line in lines if line.startswith("problem: requests/big.json: ")]


def test_the_worker_passes_its_limit_to_eval_and_refuses_over_it(tmp_path):
    from biobench.service import queue as q
    from biobench.service.worker import WorkerConfig, eval_arguments, memory_refusal

    config = WorkerConfig(results=str(tmp_path), max_model_gb=0.01)
    request = q.Request(**q.check_fields(hc.good_request("r1", model="all-MiniLM-L6-v2")))
    assert "--max-model-gb" in eval_arguments(request, tmp_path, config)
    assert "over this machine's limit of 0.01 GB" in memory_refusal(request, config)
    assert memory_refusal(request, WorkerConfig(results=str(tmp_path))) is None
    offline = q.Request(**q.check_fields(hc.good_request("r2")))  # a hub model not here: eval's to report
    assert memory_refusal(offline, config) is None
