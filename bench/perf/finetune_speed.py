"""Fine-tuning speed: biobench's loop (biobench.eval.finetune + biobench.heads) vs a plain Hugging Face Trainer
fine-tune of the same model, task, data, lengths, batch size and optimiser settings, side by side.

The baseline is what the Hugging Face examples do by default, not a strawman:
- NER (examples/pytorch/token-classification/run_ner.py defaults): AutoModelForTokenClassification, words
  tokenised with is_split_into_words, the label on the first subword of each word (-100 elsewhere),
  DataCollatorForTokenClassification with dynamic padding (pad_to_max_length=False), random sampler;
- classification: AutoModelForSequenceClassification + DataCollatorWithPadding (dynamic padding: Trainer's
  default collator; run_glue.py itself pads everything to max_seq_length by default, which would be slower);
- both: best checkpoint by dev F1 as the paper protocol (eval + save every epoch, load_best_model_at_end).
`--hf-group-by-length` gives the baseline length-grouped batches too (a stronger, less common baseline).

biobench's NER head is the paper's span head (BiLSTM + CRF + biaffine), heavier than a linear token
classifier, so the script also measures a classification task where both heads are a linear layer on [CLS].
Training tokens/s counts real (non-pad) tokens; the training time excludes dev evaluation and checkpoint
files on both sides (reported separately, with the end-to-end wall time). F1 of both arms uses the same
scorer (biobench.metrics.score on character spans / labels).

    .venv/bin/python -m biobench.perf.finetune_speed --quick
"""

from __future__ import annotations

import contextlib
import copy
import tempfile
import time
from typing import Any

from biobench.eval.encoder import load_encoder
from biobench.heads import get_head
from biobench.heads.words import segment_words
from biobench.metrics import score
from biobench.models import resolve_model
from biobench.perf.perf_common import (
    PeakMemory,
    base_parser,
    check_arms,
    environment,
    finish,
    init_arm,
    offline_environment,
    print_table,
    run_arms,
    run_isolated,
    safe_ratio,
    script,
)
from biobench.protocols import resolve_task_protocol
from biobench.runtime.batching import LengthGroupedSampler
from biobench.runtime.device import resolve_device
from biobench.tasks.loading import load_task, resolve_data_dir
from biobench.tasks.registry import get_spec

DEFAULT_TASKS = ("ncbi-disease", "gad")
QUICK_LIMITS = {"train": 1000, "dev": 300, "test": 300}


# ---------------------------------------------------------------- shared by both arms
def load_data(setup: dict[str, Any]):
    """The task's TaskData with every split cut to its limit (the same fixed subset for both arms)."""
    # lazy: loads torch
    from biobench.eval.finetune import train_subset

    spec = get_spec(setup["task"])
    data = copy.copy(load_task(spec, setup["data_dir"]))
    data.splits = {split: train_subset(examples, setup["limits"].get(split))
                   for split, examples in data.splits.items()}
    return spec, data


def protocol_for(setup: dict[str, Any], spec: Any, context: int | None):
    overrides = {"epochs": setup["epochs"]}
    if setup.get("batch_size"):
        overrides["batch_size"] = setup["batch_size"]
    if setup.get("max_length"):
        overrides["max_length"] = setup["max_length"]
    if setup.get("head"):
        overrides["head"] = setup["head"]
    return resolve_task_protocol(spec, overrides, context)


def model_folder(name: str) -> str:
    return resolve_model(name).source


# ---------------------------------------------------------------- biobench arm
def biobench_arm(setup: dict[str, Any]) -> dict[str, Any]:
    """prepare_task (tokenise once) + finetune (length-grouped dynamic batches, best state in memory)."""
    import torch

    # lazy: loads torch
    from biobench.eval.finetune import finetune, prepare_task

    init_arm(setup["threads"])
    started = time.perf_counter()
    spec, data = load_data(setup)
    encoder, tokenizer, info = load_encoder(setup["model"], "cpu", dtype=torch.float32)
    protocol = protocol_for(setup, spec, info.context)
    t0 = time.perf_counter()
    task = prepare_task(get_head(protocol.head, spec.kind), data, tokenizer, protocol)
    prepare_s = time.perf_counter() - t0
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    with PeakMemory(setup["device"]) as memory:
        outcome = finetune(task, encoder, pad_id, protocol, setup["seed"], setup["device"], progress=False)
    tokens = protocol.epochs * sum(len(f["input_ids"]) for f in task.features["train"])
    train_s = outcome.timings["train_s"]
    return {"arm": "biobench", "tokens": tokens, "train_s": train_s, "tokens_per_s": tokens / train_s,
            "eval_s": outcome.timings["eval_s"], "checkpoint_s": 0.0, "prepare_s": round(prepare_s, 3),
            "wall_s": round(time.perf_counter() - started, 3),
            "test_macro_f1": outcome.test_metrics["macro_f1"], "test_micro_f1": outcome.test_metrics["micro_f1"],
            "dev_macro_f1": outcome.dev_score, "memory": memory.to_dict(), "protocol": protocol.to_dict(),
            "encoder_params": info.params, "attn_implementation": encoder.config._attn_implementation}


# ---------------------------------------------------------------- Hugging Face Trainer arm
def word_ranges(example: Any) -> list[tuple[int, int]]:
    """Character ranges of the words a run_ner.py user feeds the model: the source's tokens (IOB data), else
    the regex words of biobench.heads.words (raw BRAT/generated documents)."""
    return segment_words(example.text, example.tokens)


def word_tags(example: Any) -> tuple[list[str], list[str]]:
    """Words and IOB2 tags of a NerExample (the input format of run_ner.py; a nested entity overwrites the
    tags of the one it is nested in — flat BIO cannot hold both)."""
    ranges = word_ranges(example)
    words = [example.text[s:e] for s, e in ranges]
    tags = ["O"] * len(words)
    for ent in example.entities:
        inside = [i for i, (s, e) in enumerate(ranges) if s >= ent.start and e <= ent.end]
        for n, i in enumerate(inside):
            tags[i] = ("B-" if n == 0 else "I-") + ent.label
    return words, tags


def tags_to_spans(example: Any, tags: list[str]) -> list[list]:
    """Predicted word tags -> sorted [start, end, label] character spans (the biobench predictions format)."""
    from seqeval.metrics.sequence_labeling import get_entities

    ranges = word_ranges(example)
    return sorted([ranges[s][0], ranges[e][1], label] for label, s, e in get_entities(tags))


def _ner_datasets(data, tokenizer, max_length: int):
    from datasets import Dataset

    labels = ["O"] + [f"{p}-{lab}" for lab in data.labels for p in ("B", "I")]
    index = {lab: i for i, lab in enumerate(labels)}

    def encode(examples):
        pairs = [word_tags(ex) for ex in examples]
        enc = tokenizer([w for w, _ in pairs], is_split_into_words=True, truncation=True, max_length=max_length)
        rows = []
        for i, (_, tags) in enumerate(pairs):
            previous, row = None, []
            for word in enc.word_ids(i):
                row.append(-100 if word is None or word == previous else index[tags[word]])
                previous = word
            rows.append(row)
        return Dataset.from_dict({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                                  "labels": rows})

    return labels, {split: encode(data.splits[split]) for split in ("train", "dev", "test")}


def _ner_predictions(examples, logits, label_ids, labels) -> list[list]:
    """Per example, spans from the first-subword predictions (words cut by truncation are predicted O)."""
    out = []
    for ex, row_logits, row_labels in zip(examples, logits, label_ids, strict=True):
        chosen = [labels[int(p)] for p, gold in zip(row_logits.argmax(-1), row_labels, strict=True) if gold != -100]
        n_words = len(word_ranges(ex))
        chosen = (chosen + ["O"] * n_words)[:n_words]
        out.append(tags_to_spans(ex, chosen))
    return out


def _cls_datasets(data, tokenizer, max_length: int):
    from datasets import Dataset

    labels = list(data.labels)
    index = {lab: i for i, lab in enumerate(labels)}

    def encode(examples):
        enc = tokenizer([ex.text for ex in examples], truncation=True, max_length=max_length)
        return Dataset.from_dict({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                                  "labels": [index[ex.label] for ex in examples]})

    return labels, {split: encode(data.splits[split]) for split in ("train", "dev", "test")}


def _timed_trainer(trainer_class: type) -> type:
    """`trainer_class` (transformers.Trainer) accounting the time of dev evaluation and of checkpoint files in
    its `timers`, so the arm's training time excludes them."""

    class TimedTrainer(trainer_class):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.timers = {"eval_s": 0.0, "checkpoint_s": 0.0}

        @contextlib.contextmanager
        def _timed(self, key: str):
            t = time.perf_counter()
            try:
                yield
            finally:
                self.timers[key] += time.perf_counter() - t

        def evaluate(self, *args, **kwargs):
            with self._timed("eval_s"):
                return super().evaluate(*args, **kwargs)

        def _save_checkpoint(self, *args, **kwargs):
            with self._timed("checkpoint_s"):
                return super()._save_checkpoint(*args, **kwargs)

    return TimedTrainer


def _training_arguments(setup: dict[str, Any], protocol: Any, out: str):
    """The TrainingArguments a user would write for the protocol: an evaluation and a checkpoint per epoch, the
    best on dev macro-F1 loaded at the end."""
    from transformers import TrainingArguments

    return TrainingArguments(
        output_dir=out, num_train_epochs=protocol.epochs, per_device_train_batch_size=protocol.batch_size,
        per_device_eval_batch_size=max(protocol.batch_size, 16), learning_rate=protocol.lr,
        weight_decay=protocol.weight_decay, warmup_steps=protocol.warmup_ratio,
        max_grad_norm=protocol.grad_clip, eval_strategy="epoch", save_strategy="epoch",
        load_best_model_at_end=True, metric_for_best_model="f1", save_total_limit=1, seed=setup["seed"],
        report_to="none", disable_tqdm=True, use_cpu=setup["device"] == "cpu",
        bf16=str(setup["device"]).startswith("cuda"),
        train_sampling_strategy="group_by_length" if setup["hf_group_by_length"] else "random",
    )


def hf_arm(setup: dict[str, Any]) -> dict[str, Any]:
    """The Trainer fine-tune a user would write (see the module docstring for its defaults)."""
    import torch
    from transformers import (
        AutoModelForSequenceClassification,
        AutoModelForTokenClassification,
        AutoTokenizer,
        DataCollatorForTokenClassification,
        DataCollatorWithPadding,
        Trainer,
    )

    init_arm(setup["threads"])
    started = time.perf_counter()
    spec, data = load_data(setup)
    folder = model_folder(setup["model"])
    tokenizer = AutoTokenizer.from_pretrained(folder)
    protocol = protocol_for(setup, spec, getattr(tokenizer, "model_max_length", None))
    ner = spec.kind == "ner"
    t0 = time.perf_counter()
    labels, sets = (_ner_datasets if ner else _cls_datasets)(data, tokenizer, protocol.max_length)
    prepare_s = time.perf_counter() - t0
    head = get_head(protocol.head, spec.kind)
    gold = {split: [head.gold(ex) for ex in data.splits[split]] for split in ("dev", "test")}

    def predictions(split: str, logits, label_ids) -> list:
        if ner:
            return _ner_predictions(data.splits[split], logits, label_ids, labels)
        return [labels[int(i)] for i in logits.argmax(-1)]

    def compute_metrics(prediction) -> dict[str, float]:
        preds = predictions("dev", prediction.predictions, prediction.label_ids)
        return {"f1": score(spec.kind, gold["dev"], preds, data.labels)["macro_f1"]}

    auto = AutoModelForTokenClassification if ner else AutoModelForSequenceClassification
    torch.manual_seed(setup["seed"])
    model = auto.from_pretrained(folder, num_labels=len(labels), id2label=dict(enumerate(labels)),
                                 label2id={lab: i for i, lab in enumerate(labels)})
    collator = (DataCollatorForTokenClassification if ner else DataCollatorWithPadding)(tokenizer)
    with tempfile.TemporaryDirectory(prefix="hf-finetune-") as out:
        args = _training_arguments(setup, protocol, out)
        trainer = _timed_trainer(Trainer)(model=model, args=args, train_dataset=sets["train"], eval_dataset=sets["dev"],
                                          data_collator=collator, compute_metrics=compute_metrics)
        timers = trainer.timers
        with PeakMemory(setup["device"]) as memory:
            t0 = time.perf_counter()
            trainer.train()
            loop_s = time.perf_counter() - t0
        train_s = loop_s - timers["eval_s"] - timers["checkpoint_s"]
        dev_f1 = trainer.state.best_metric
        t0 = time.perf_counter()
        output = trainer.predict(sets["test"])
        timers["eval_s"] += time.perf_counter() - t0
    test = score(spec.kind, gold["test"], predictions("test", output.predictions, output.label_ids), data.labels)
    tokens = protocol.epochs * sum(len(ids) for ids in sets["train"]["input_ids"])
    return {"arm": "hf-trainer", "tokens": tokens, "train_s": round(train_s, 3), "tokens_per_s": tokens / train_s,
            "eval_s": round(timers["eval_s"], 3), "checkpoint_s": round(timers["checkpoint_s"], 3),
            "prepare_s": round(prepare_s, 3), "wall_s": round(time.perf_counter() - started, 3),
            "test_macro_f1": test["macro_f1"], "test_micro_f1": test["micro_f1"], "dev_macro_f1": dev_f1,
            "memory": memory.to_dict(), "encoder_params": model.base_model.num_parameters(),
            "attn_implementation": model.config._attn_implementation,
            "baseline": {"collator": type(collator).__name__, "sampler": args.train_sampling_strategy,
                         "labels": "first subword" if ner else "sequence"}}


def profile_arm(setup: dict[str, Any], steps: int = 8) -> dict[str, Any]:
    """Where biobench's training step spends its time: torch.profiler over `steps` length-grouped batches of
    the real head model, plus the same batches through the encoder alone (forward + backward of a dummy
    loss), so head cost = full step - encoder step. Not timed against anything: `--arms profile`."""
    import torch

    # lazy: loads torch
    from biobench.eval.finetune import _optimizer, prepare_task
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.data import DataLoader

    init_arm(setup["threads"])
    spec, data = load_data(setup)
    encoder, tokenizer, info = load_encoder(setup["model"], "cpu", dtype=torch.float32)
    protocol = protocol_for(setup, spec, info.context)
    task = prepare_task(get_head(protocol.head, spec.kind), data, tokenizer, protocol)
    pad_id = tokenizer.pad_token_id or 0
    model = task.head.build(encoder, task.labels, task.examples["train"]).train()
    train = task.features["train"]
    sampler = LengthGroupedSampler(protocol.batch_size, lengths=[len(f["input_ids"]) for f in train],
                                   generator=torch.Generator().manual_seed(0))
    # a list is a map-style dataset (__getitem__, __len__); torch's annotation asks for a Dataset
    loader: DataLoader[Any] = DataLoader(train, batch_size=protocol.batch_size, sampler=sampler,  # type: ignore[arg-type]
                                         collate_fn=lambda feats: task.head.collate(feats, pad_id))
    batches = [b for b, _ in zip(loader, range(steps + 1), strict=False)]
    optimizer = _optimizer(model, protocol)

    def full(batch):
        model(batch)["loss"].backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def encoder_only(batch):
        out = model.encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        out.last_hidden_state.float().mean().backward()
        model.zero_grad(set_to_none=True)

    timings = {}
    for name, fn in (("encoder_only_s", encoder_only), ("full_step_s", full)):
        fn(batches[0])
        t0 = time.perf_counter()
        for b in batches[1:]:
            fn(b)
        timings[name] = round(time.perf_counter() - t0, 3)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for b in batches[1:]:
            full(b)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)
    print(table)
    tokens = sum(int(b["attention_mask"].sum()) for b in batches[1:])
    return {"arm": "profile", "steps": len(batches) - 1, "tokens": tokens, **timings,
            "head_share": round(1 - timings["encoder_only_s"] / timings["full_step_s"], 3),
            "tokens_per_s": tokens / timings["full_step_s"], "train_s": timings["full_step_s"],
            "memory": {"peak_mb": None}, "top_ops": table}


ARMS = {"biobench": biobench_arm, "hf-trainer": hf_arm, "profile": profile_arm}


# ---------------------------------------------------------------- driver
def parse_args(argv: list[str] | None = None):
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(DEFAULT_TASKS),
                        help="comma-separated task ids; the ratio printed last is the first task's")
    parser.add_argument("--model", default="all-MiniLM-L6-v2", help="model alias, hub id or local folder")
    parser.add_argument("--data-dir", default=None, help="data root in the documented layout (default: $BIOBENCH_DATA)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=None, help="default: the task protocol's (16 for en)")
    parser.add_argument("--max-length", type=int, default=None, help="default: the task's (512 here)")
    parser.add_argument("--limit-train", type=int, default=None, help="train examples (quick: 1000)")
    parser.add_argument("--limit-eval", type=int, default=None, help="dev and test examples each (quick: 300)")
    parser.add_argument("--arms", default="biobench,hf-trainer", help="which arms to run")
    parser.add_argument("--head", default=None, help="biobench's head (default: the task protocol's, e.g. hf-token "
                        "for English NER; span for the paper's French span head)")
    parser.add_argument("--hf-group-by-length", action="store_true",
                        help="give the Trainer baseline length-grouped batches too")
    parser.add_argument("--in-process", action="store_true", help="run arms in this process (debugging)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each arm, alternating (A B, B A, ...); "
                        "medians reported")
    args = parser.parse_args(argv)
    check_arms(parser, args.arms, ARMS)
    return args


def setups(args) -> list[dict[str, Any]]:
    limit_eval = args.limit_eval or (QUICK_LIMITS["dev"] if args.quick else None)
    limits = {"train": args.limit_train or (QUICK_LIMITS["train"] if args.quick else None),
              "dev": limit_eval, "test": limit_eval}
    data_dir = resolve_data_dir(args.data_dir)  # None: only tasks that need no files (demo-*) load
    return [{"task": task, "model": args.model, "data_dir": str(data_dir) if data_dir else None, "epochs": args.epochs,
             "batch_size": args.batch_size, "max_length": args.max_length, "limits": limits,
             "seed": args.seed, "device": resolve_device(args.device), "threads": args.threads,
             "hf_group_by_length": args.hf_group_by_length, "head": args.head}
            for task in args.tasks.split(",")]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    offline_environment()
    report: dict[str, Any] = {"script": "finetune_speed", "tasks": {}}
    rows = []
    for setup in setups(args):
        print(f"[{setup['task']}] running {args.arms} x {args.repeats}, alternating ...", flush=True)

        def measure(name: str, setup: dict[str, Any] = setup) -> dict[str, Any]:
            return run_isolated(ARMS[name], setup, isolate=not args.in_process, arm_name=f"{setup['task']} {name}")

        arms = run_arms(args.arms.split(","), measure, args.repeats, "tokens_per_s")
        ratio = safe_ratio(arms.get("biobench", {}).get("tokens_per_s"), arms.get("hf-trainer", {}).get("tokens_per_s"))
        report["tasks"][setup["task"]] = {"setup": setup, "arms": arms, "ratio": ratio}
        for arm in arms.values():
            rows.append({"task": setup["task"], **arm, "peak_mb": arm["memory"]["peak_mb"]})
    report["environment"] = environment(resolve_device(args.device))
    print_table(rows, [("task", "task", ""), ("arm", "arm", ""), ("tokens", "train tokens", ",d"),
                       ("train_s", "train s", ".1f"), ("tokens_per_s", "tokens/s", ",.0f"),
                       ("eval_s", "eval s", ".1f"), ("checkpoint_s", "ckpt s", ".1f"),
                       ("wall_s", "wall s", ".1f"), ("test_macro_f1", "test F1", ".4f"),
                       ("dev_macro_f1", "dev F1", ".4f"), ("peak_mb", "peak MiB", ",.0f")])
    ratios = {task: entry["ratio"] for task, entry in report["tasks"].items()}
    for task, value in ratios.items():
        print(f"ratio[{task}] (biobench / Trainer training tokens/s): {value:.2f}" if value else f"ratio[{task}]: -")
    return finish(report, args.out, next(iter(ratios.values()), None))


if __name__ == "__main__":
    raise SystemExit(script(main))
