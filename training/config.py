"""Pretraining settings, each stated once: its default, its bounds and its help text are fields of
`PretrainConfig`. The `biobench pretrain` flags, its `--config run.toml` file and the resolved config written
beside the checkpoints (<out>/pretrain_config.toml) are all made from these fields; the trainer reads the
dataclass. Torch-free, so that `biobench --help` builds the flags without loading torch.

The optimiser and warmup defaults are the paper's (§3.2, Appendix: AdamW peak lr 2e-4, betas (0.9, 0.98),
eps 1e-6, decoupled weight decay 1e-5): training/optim.py reads them from here; the 100M warmup tokens are
training/schedules.py's.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from biobench.errors import ConfigError
from biobench.ranges import Bounds
from biobench.training.recipes import recipes_help
from biobench.training.schedules import PAPER_WARMUP_TOKENS

PAPER_OPTIMIZER: dict[str, Any] = dict(lr=2e-4, betas=(0.9, 0.98), eps=1e-6, weight_decay=1e-5)


def setting(default: Any = MISSING, *, help: str | None = None, bounds: Bounds | None = None,
            cli: dict[str, Any] | None = None, default_factory: Any = MISSING) -> Any:
    """A field of PretrainConfig with what the command line needs to offer it: its help (a field with one is a
    `biobench pretrain` flag, `--field-name`), its bounds (checked by `check`) and argparse extras (`cli`: type,
    choices, metavar, action). The one statement of each setting: the flags, `--config run.toml` and the
    resolved config written beside the checkpoint are all made from these fields."""
    metadata = {"help": help, "bounds": bounds, "cli": cli or {}}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(kw_only=True)
class PretrainConfig:
    recipe: str = setting("detour", help=recipes_help())
    model: str = setting(help="hub id, local folder, or preset:tiny / preset:small / preset:tiny-decoder "
                              "(tokenizer trained on the corpus)")
    corpus: str = setting(help="text file/folder, JSONL(.gz) with a text field, or a hub dataset id")
    text_field: str = setting("text", help="JSON field holding the text")
    out: Path = setting(help="output folder: init/, phase1/, final/, step-*/, train_log.jsonl", cli={"type": Path})
    # phase 1; phase 2 runs decay_ratio of it
    tokens: int = setting(help="phase-1 token budget, e.g. 2M, 10B; phase 2 runs --decay-ratio of it",
                          bounds=Bounds(1, 1e15, integer=True), cli={"type": "tokens"})
    decay_ratio: float = setting(0.10, help="phase-2 length / phase-1 length", bounds=Bounds(0, 1, above=True))
    freeze: list[str] = setting(default_factory=list, help="also freeze layers A..B in the CLM (phase 1) or decay "
                                "(phase 2) phase; repeatable", cli={"action": "append", "metavar": "A-B@clm|@decay"})
    batch_size: int | str = setting(384, help="global batch in sequences (16 for presets on CPU); 'auto': this "
                                    "batch, with --micro-batch-size auto",
                                    bounds=Bounds(1, 1 << 20, integer=True), cli={"type": "batch"})
    seq_len: int = setting(8192, help="packed sequence length (512 for presets on CPU)",
                           bounds=Bounds(8, 1 << 20, integer=True), cli={"type": int})
    # per process; None = the whole per-process batch; "auto": the largest that fits
    micro_batch_size: int | str | None = setting(None, help="sequences per forward pass per process (gradient "
                                                 "accumulation reaches --batch-size; default: 16 on CPU, 4 on GPU); "
                                                 "'auto': the largest that fits the GPU (halving on out-of-memory), "
                                                 "the whole per-process batch on CPU", cli={"type": "batch"})
    lr: float = setting(PAPER_OPTIMIZER["lr"], help="peak learning rate", bounds=Bounds(0, 1, above=True))
    betas: tuple[float, float] = setting(PAPER_OPTIMIZER["betas"])
    eps: float = setting(PAPER_OPTIMIZER["eps"], bounds=Bounds(0, 1, above=True))
    weight_decay: float = setting(PAPER_OPTIMIZER["weight_decay"], help="decoupled weight decay", bounds=Bounds(0, 10))
    warmup_tokens: int = setting(PAPER_WARMUP_TOKENS, help="phase-1 warmup, capped at 10%% of phase 1",
                                 bounds=Bounds(0, 1e15, integer=True), cli={"type": "tokens"})
    grad_clip: float | None = setting(1.0, help="gradient-norm clipping, 0 = off", bounds=Bounds(0, 1e6))
    # tokens; step-<tokens>/, all kept
    save_every: int | None = setting(None, help="also checkpoint every N tokens (e.g. 500M) to step-<tokens>/",
                                     bounds=Bounds(1, 1e15, integer=True), cli={"type": "tokens"})
    # a rolling resume-<tokens>/ checkpoint this often (only the latest is kept); None or 0: only on a signal
    save_minutes: float | None = setting(30.0, help="a resumable checkpoint every N minutes of training to "
                                         "resume-<tokens>/, replacing the previous one; Ctrl-C, SIGTERM or SIGUSR1 "
                                         "also writes one after the current step (0 = only on a signal)",
                                         bounds=Bounds(0, 10**6))
    resume: str | bool | None = setting(None, help="continue from DIR, or from the latest checkpoint under --out",
                                        cli={"nargs": "?", "const": True, "metavar": "DIR"})
    doc_mask: bool = setting(False, help="restart positions per document and block cross-document attention "
                                         "(sdpa/eager)")
    seed: int = setting(0, help="model init (presets) and MLM masking", bounds=Bounds(0, 2**32 - 1, integer=True))
    # packed-sequence order; None = seed (the seed-noise control fixes it)
    data_seed: int | None = setting(None, help="order of the packed sequences (default: --seed); fix it and vary "
                                    "--seed for the seed-noise control (train_log.jsonl's data_digest shows the "
                                    "order is identical)", bounds=Bounds(0, 2**32 - 1, integer=True))
    # documents per source never trained on, their loss logged (mixture.split_sources, Trainer._validate)
    heldout_docs: int | None = setting(None, help="hold N documents of each source (each mix source, or the store) "
                                       "out of training, a fixed set drawn from the source's name, and log their "
                                       "loss per source at the end of each phase and every --eval-every steps "
                                       "(0 = none)", bounds=Bounds(0, 1e7, integer=True))
    eval_every: int | None = setting(None, help="evaluate the --heldout-docs documents every N optimiser steps "
                                     "(and at the end of each phase)", bounds=Bounds(1, 1e12, integer=True))
    max_documents: int | None = setting(None, help="read at most this many documents of the corpus",
                                        bounds=Bounds(1, 1e12, integer=True))
    cache_dir: Path | None = setting(None, help="tokenised-corpus cache (default ~/.cache/biobench/tokens)",
                                     cli={"type": Path})
    device: str | None = setting(None, help="cpu, cuda, cuda:1 (default: cuda when available)")
    max_model_gb: float | None = setting(None, help="refuse a model whose float32 weights exceed GB, estimated from "
                                         "its config.json before it is built (default $BIOBENCH_MAX_MODEL_GB, else "
                                         "only the device's memory bounds it)", bounds=Bounds(0, 1e6, above=True))
    precision: str = setting("auto", help="auto = bf16 autocast on CUDA, fp32 on CPU",
                             cli={"choices": ["auto", "bf16", "fp32"]})
    attn: str | None = setting(None, help="attention backend (default: flash_attention_2 on CUDA when installed, "
                                          "else sdpa)", cli={"choices": ["sdpa", "eager", "flash_attention_2"]})
    fsdp: bool = setting(False, help="shard the model with FSDP2 instead of DDP (multi-GPU)")
    # recompute activations in backward: long sequences on less memory
    gradient_checkpointing: bool = setting(False, help="recompute activations in the backward pass (less memory "
                                                       "at 8192 tokens, ~30%% slower)")
    progress: bool = setting(True, help="a progress bar")
    language: str | None = setting(None, help="model-card language (ISO 639-1, e.g. fr)")
    license: str | None = setting(None, help="model-card licence id (e.g. apache-2.0; default: none stated)")
    # torch.compile the encoder (fixed shapes: packed sequences)
    compile: bool = setting(False, help="torch.compile the encoder (first steps slower while it compiles)")
    loader_workers: int | None = setting(None, help="batch-building processes (default: 2 on CUDA, 0 on CPU)",
                                         bounds=Bounds(0, 256, integer=True))
    # "tensorboard" / "wandb": scalars also to <out>/<backend>/ (runtime/reporting.py)
    report_to: str | None = setting(None, help="also report loss, lr, grad norm, tokens/s and MFU per step, to "
                                               "<out>/tensorboard/ or <out>/wandb/ (needs the 'tensorboard' or "
                                               "'wandb' extra)", cli={"choices": ["none", "tensorboard", "wandb"]})
    # stop (as if interrupted) after this many global steps (tests; a config-file setting, no flag)
    stop_after_steps: int | None = setting(None, bounds=Bounds(1, 1e12, integer=True))

    def check(self) -> PretrainConfig:
        """Every number within the bounds its field states (ConfigError naming the flag otherwise), checked before
        anything is loaded: `--weight-decay nan` once trained to a checkpoint of NaN tensors, `--lr nan` was a
        traceback and `--save-minutes -5` was accepted. Returns the config."""
        for spec in fields(self):
            bounds, value = spec.metadata.get("bounds"), getattr(self, spec.name)
            if bounds is not None and value is not None:
                bounds.check(value, f"--{spec.name.replace('_', '-')}")
        if not (isinstance(self.betas, tuple | list) and len(self.betas) == 2):
            raise ConfigError(f"betas {self.betas!r}: expected two numbers")
        for beta in self.betas:
            Bounds(0, 1, below=True).check(beta, "betas")
        if self.eval_every is not None and not self.heldout_docs:
            raise ConfigError(f"--eval-every {self.eval_every} evaluates held-out documents: give --heldout-docs N "
                              "too (documents per source held out of training)")
        return self

    def to_json(self) -> dict[str, Any]:
        """The config as JSON values (paths as strings, tuples as lists) that `from_json` turns back into it:
        saved with the resume state, so a checkpoint says how it was trained."""
        return {k: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v
                for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PretrainConfig:
        """The config `to_json` saved; ConfigError naming the fields this version does not know."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(f"saved pretraining config has unknown field(s) {', '.join(unknown)}")
        values = dict(data)
        for name in ("out", "cache_dir"):
            if values.get(name) is not None:
                values[name] = Path(values[name])
        if values.get("betas") is not None:
            values["betas"] = tuple(values["betas"])
        return cls(**values)


def config_defaults() -> dict[str, Any]:
    """Each PretrainConfig setting's default (fields without one are left out)."""
    out = {}
    for spec in fields(PretrainConfig):
        if spec.default is not MISSING:
            out[spec.name] = spec.default
        elif spec.default_factory is not MISSING:
            out[spec.name] = spec.default_factory()
    return out


