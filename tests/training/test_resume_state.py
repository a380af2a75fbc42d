"""The resume state is data, never a pickle: exact round trip, and planted or legacy pickles are refused
with one line before anything in them can run."""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path

import pytest
import torch
from biobench.errors import BiobenchError, ConfigError
from biobench.training import checkpoint
from biobench.training.optim import build_optimizer
from biobench.training.trainer import PretrainConfig, Trainer


class Payload:
    """Unpickling this writes `marker`: what a malicious checkpoint folder could do to --resume."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({str(self.marker)!r}, 'w').write('pwned')",))


def _optimizer_state() -> dict:
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
    opt = build_optimizer(model)
    model(torch.randn(2, 3)).sum().backward()
    opt.step()
    return opt.state_dict()


def _folder(tmp_path: Path, recipe: str = "mlm") -> Path:
    """A checkpoint folder as far as --resume looks before loading weights: metadata naming the recipe."""
    folder = tmp_path / "run" / "step-768"
    (folder / checkpoint.STATE).parent.mkdir(parents=True)
    (folder / checkpoint.META).write_text(json.dumps({"schema": checkpoint.SCHEMA, "recipe": recipe,
                                                      "tokens": {"seen": 768}}))
    return folder


def _cfg(tmp_path: Path, resume) -> PretrainConfig:
    return PretrainConfig(recipe="mlm", model="preset:tiny", corpus=str(tmp_path / "corpus.jsonl"),
                          out=tmp_path / "run", tokens=4 * 4 * 64, batch_size=4, seq_len=64, progress=False,
                          resume=resume, device="cpu")


def test_state_round_trips_exactly_without_pickle(tmp_path):
    state = {"optimizer": _optimizer_state(), "trainer": {"phase": 1, "step": 3, "position": 12, "global_step": 9,
                                                          "tokens": {"seen": 2304, "clm": 1536}},
             "rng": {"torch": torch.get_rng_state(), "cuda": [torch.tensor([1, 2], dtype=torch.uint8)],
                     "python": random.getstate()},
             "config": {"lr": "0.001"}, "odd": {"__tensor__": "not a reference", 3: (1.5, None, float("inf"))}}
    checkpoint.save_state(tmp_path / checkpoint.STATE, state)
    assert not list(tmp_path.glob("*.safetensors"))  # never mistaken for the model's weights (revision hash, hub)
    back = checkpoint.load_state(tmp_path)
    assert back["trainer"] == state["trainer"] and back["config"] == state["config"] and back["odd"] == state["odd"]
    assert back["rng"]["python"] == random.getstate()  # tuples come back as tuples: random.setstate accepts it
    random.setstate(back["rng"]["python"])
    assert torch.equal(back["rng"]["torch"], state["rng"]["torch"]) and back["rng"]["torch"].dtype == torch.uint8
    assert torch.equal(back["rng"]["cuda"][0], state["rng"]["cuda"][0])
    opt, saved = back["optimizer"], state["optimizer"]
    assert opt["param_groups"] == saved["param_groups"] and opt["param_groups"][0]["betas"] == (0.9, 0.98)
    assert opt["state"].keys() == saved["state"].keys()  # int parameter indices stay ints
    for i, entry in saved["state"].items():
        assert all(torch.equal(opt["state"][i][k], v) for k, v in entry.items())
    # the file is plain safetensors: its non-tensor part is readable JSON
    from safetensors import safe_open

    with safe_open(str(tmp_path / checkpoint.STATE), framework="pt") as handle:
        header = json.loads(handle.metadata()[checkpoint.STATE_KEY])
    assert header["schema"] == checkpoint.STATE_SCHEMA and header["state"]["trainer"]["position"] == 12


@pytest.mark.parametrize("name", [checkpoint.STATE, checkpoint.LEGACY_STATE])
@pytest.mark.parametrize("writer", ["pickle", "torch.save"])
def test_resume_refuses_a_planted_pickle_without_running_it(tmp_path, name, writer):
    folder = _folder(tmp_path)
    marker = tmp_path / "marker"
    with (folder / name).open("wb") as fh:
        (pickle.dump if writer == "pickle" else torch.save)(Payload(marker), fh)
    with pytest.raises(ConfigError) as err:
        Trainer(_cfg(tmp_path, resume=str(folder)))
    message = str(err.value)
    assert str(folder / name) in message and "\n" not in message
    if name == checkpoint.STATE:
        assert "is not a biobench trainer state file (a pickle)" in message
    else:
        assert "was written by an older biobench as a pickle, which is no longer loaded" in message
        assert f"--model {folder}" in message
    assert not marker.exists()
    pickle.loads(pickle.dumps(Payload(marker)))  # the payload is live: unpickling it would have written the marker
    assert marker.read_text() == "pwned"


def test_cli_resume_refuses_a_legacy_state_in_one_line(tmp_path, capsys):
    """An old-format trainer_state.pt (pickled by the previous version), found by --resume alone."""
    from biobench.cli import main

    folder = _folder(tmp_path)
    marker = tmp_path / "marker"
    torch.save({"optimizer": _optimizer_state(), "trainer": {"phase": 0}, "payload": Payload(marker),
                "rng": {"torch": torch.get_rng_state(), "cuda": None}}, folder / checkpoint.LEGACY_STATE)
    code = main(["pretrain", "--recipe", "mlm", "--model", "preset:tiny", "--corpus", str(tmp_path / "c.jsonl"),
                 "--tokens", "16K", "--out", str(tmp_path / "run"), "--resume", "--device", "cpu", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: --resume: {folder / checkpoint.LEGACY_STATE} was written by an older biobench")
    assert not marker.exists()


def test_truncated_or_foreign_state_is_one_clear_error(tmp_path):
    folder = _folder(tmp_path)
    checkpoint.save_state(folder / checkpoint.STATE, {"optimizer": {}, "trainer": {}, "rng": {"torch": torch.zeros(3)}})
    data = (folder / checkpoint.STATE).read_bytes()
    (folder / checkpoint.STATE).write_bytes(data[:-5])
    with pytest.raises(BiobenchError, match=r"is not a biobench trainer state file \(unreadable as safetensors"):
        checkpoint.load_state(folder)
    from safetensors.torch import save_file

    save_file({"x": torch.zeros(2)}, str(folder / checkpoint.STATE), metadata={"format": "pt"})
    with pytest.raises(BiobenchError, match=r"not a biobench trainer state file \(bad biobench metadata"):
        checkpoint.load_state(folder)


def test_state_that_does_not_fit_the_run_is_one_clear_error(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"Patient {i} présente une toux sèche et de la fièvre."}) + "\n"
                              for i in range(60)))
    cfg = dict(recipe="mlm", model="preset:tiny", corpus=str(corpus), out=tmp_path / "run", tokens=4 * 64, batch_size=4,
               seq_len=64, progress=False, cache_dir=tmp_path / "cache", device="cpu")
    from biobench.training.trainer import train

    assert train(PretrainConfig(**cfg, stop_after_steps=1)) is None  # phase 1 done (1 step), stopped before phase 2
    state = checkpoint.load_state(tmp_path / "run" / "phase1")
    state["optimizer"]["param_groups"] = state["optimizer"]["param_groups"][:1]  # e.g. another model's state
    checkpoint.save_state(tmp_path / "run" / "phase1" / checkpoint.STATE, state)
    with pytest.raises(ConfigError, match=r"^--resume: .*phase1/resume/trainer_state.safetensors does not fit this "
                                          r"run's model and optimiser \(ValueError: "):
        Trainer(PretrainConfig(**cfg, resume=True))


def test_the_saved_training_config_loads_back(tmp_path):
    cfg = _cfg(tmp_path, resume=None)
    cfg.cache_dir, cfg.freeze = tmp_path / "cache", ["0-3:phase1"]
    saved = json.loads(json.dumps(cfg.to_json()))  # what the resume state's JSON tree holds
    assert saved["out"] == str(tmp_path / "run") and saved["betas"] == list(cfg.betas) and saved["resume"] is None
    assert PretrainConfig.from_json(saved) == cfg
    with pytest.raises(ConfigError, match="unknown field.*colour"):
        PretrainConfig.from_json({**saved, "colour": "red"})
