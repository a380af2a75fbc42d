"""`biobench analyze cka|transplant|probe|needle`: the paper's analyses (§3.4, §4.4, §5, Appendix I)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from biobench.errors import ConfigError
from biobench.ranges import parse_ranges
from biobench.runtime.device import resolve_device as _device
from biobench.runtime.files import atomic_write
from biobench.tasks.registry import add_task_arguments

CKA_HELP = """\
Linear CKA (float64) between the mean-pooled hidden states of two models (encoders, or decoders such as
Gemma-3: mask-aware mean over tokens), layer by layer: the embedding output is reported apart, transformer
layers are numbered 0..L-1 as in --freeze and `analyze transplant`. Divergence = 1 - CKA, averaged over
--sample-seeds (each seed samples --n texts, in equal shares from the --texts sources). The Table-4 summary
is the mean divergence over transformer layers (embeddings only with --include-embeddings) with its 95%
Student-t CI over the sample seeds. With --noise N, a second seed of the reference model B, each
layer also gets the seed-noise ratio  r_l = div(A, B) / div(N, B)  (numerator: A vs B; denominator: N vs B).
Paper §5.1: A = the CLM-detour model, B = MLM seed 1, N = MLM seed 2, i.e.
r_l = div(CLM, MLM_s1) / div(MLM_s2, MLM_s1)."""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("analyze", help="the paper's analyses: CKA, transplants, linear probes, needle test",
                                   description=__doc__)
    sub = parser.add_subparsers(dest="analysis", metavar="ANALYSIS", required=True)
    _add_cka(sub)
    _add_cka_trajectory(sub)
    _add_transplant(sub)
    _add_probe(sub)
    _add_needle(sub)


def _add_cka(sub) -> None:
    """`analyze cka`: per-layer CKA between two models."""
    p = sub.add_parser("cka", help="per-layer linear CKA divergence between two models (+ seed-noise ratio)",
                       description=CKA_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs=2, metavar=("A", "B"), required=True,
                   help="A (e.g. the CLM-detour model) and the reference B (e.g. MLM seed 1)")
    p.add_argument("--noise", metavar="N", help="a second seed of B (e.g. MLM seed 2): adds r_l = div(A,B)/div(N,B)")
    p.add_argument("--texts", required=True, nargs="+", metavar="PATH|TASK",
                   help="one or more sources, mixed in equal shares: text files/folders (.jsonl[.gz] 'text' "
                   "records, .txt lines) or task ids (all their splits). Paper: French DiaMED + FrACCO, English "
                   "PubMed abstracts")
    p.add_argument("--n", type=int, default=500, help="texts per sample seed, all sources together (default 500)")
    p.add_argument("--include-embeddings", action="store_true",
                   help="average over the embedding output too (default: transformer layers only)")
    p.add_argument("--sample-seeds", default="42,43,44", help="seeds of the text samples (default 42,43,44)")
    p.add_argument("--max-length", type=int, default=512, help="tokens per text (default 512)")
    p.add_argument("--batch-size", type=int, default=8, help="texts per forward pass")
    p.add_argument("--data-dir", metavar="DIR", default=None, help="task data folder when --texts is a task id")
    p.add_argument("--align-relative", action="store_true",
                   help="for models of different depth: pair layers by relative depth instead of failing")
    _common(p)
    p.add_argument("--out", required=True, metavar="DIR", help="writes DIR/cka.json and DIR/cka.png")
    p.set_defaults(func=run_cka)


def _add_cka_trajectory(sub) -> None:
    """`analyze cka-trajectory`: CKA against the start model along a pretraining run."""
    p = sub.add_parser("cka-trajectory", help="CKA divergence vs the start model for every checkpoint of a run",
                       description="Paper Figure 3a: for every step-*/ checkpoint of a `biobench pretrain` run "
                       "(and phase1/, final/), the mean CKA divergence over transformer layers from the start "
                       "model, with its 95% CI over sample seeds. Writes DIR/cka_trajectory.json and .png "
                       "(the leaderboard's Plots tab shows them).")
    p.add_argument("--run", required=True, metavar="DIR", help="a `biobench pretrain --out` folder")
    p.add_argument("--start", metavar="MODEL", help="the start model (default: base_model in the run's metadata)")
    p.add_argument("--texts", required=True, nargs="+", metavar="PATH|TASK", help="as for `analyze cka`")
    p.add_argument("--n", type=int, default=500, help="texts per sample seed (default 500)")
    p.add_argument("--sample-seeds", default="42,43,44", help="seeds of the text samples (default 42,43,44)")
    p.add_argument("--max-length", type=int, default=512, help="tokens per text (default 512)")
    p.add_argument("--batch-size", type=int, default=8, help="texts per forward pass")
    p.add_argument("--data-dir", metavar="DIR", default=None, help="task data folder when --texts has task ids")
    p.add_argument("--include-embeddings", action="store_true", help="average over the embedding output too")
    _common(p)
    p.add_argument("--out", metavar="DIR", help="default: the run folder")
    p.set_defaults(func=run_cka_trajectory)


def _add_transplant(sub) -> None:
    """`analyze transplant`: copy layers of one model into another."""
    p = sub.add_parser("transplant", help="copy a layer range (or only attention / MLP) of model A into model B",
                       description="Copy the parameters of a layer range (all, or only attention / MLP) of model A "
                       "into model B and save the result as a new model folder, to evaluate like any other.")
    p.add_argument("--from", dest="source", required=True, metavar="A", help="model the parameters come from")
    p.add_argument("--into", dest="target", required=True, metavar="B", help="model that receives them (its head "
                   "and tokenizer are kept)")
    p.add_argument("--layers", required=True, help="transformer layers, 0-based: 0-7, 8-14, 0-3,8")
    p.add_argument("--component", default="all",
                   help="all | attention (with its norm) | mlp (with its norm); default all")
    p.add_argument("--out", required=True, metavar="DIR", help="new model folder (+ transplant.json)")
    p.set_defaults(func=run_transplant)


def _add_probe(sub) -> None:
    """`analyze probe`: linear probes on frozen features."""
    p = sub.add_parser("probe", help="logistic-regression probe on frozen features, macro-F1 per seed",
                       description="Fit a logistic-regression probe on a frozen model's pooled features of one "
                       "layer, once per seed, and store macro-F1 per seed as results (a variant of the model).")
    p.add_argument("--model", required=True, help="alias, hub id or local model folder (as for `biobench eval`)")
    p.add_argument("--task", required=True, help="a classification, relation or multilabel task id")
    p.add_argument("--seeds", default="42-44", help="probe seeds (LR random_state + train subsample); default 42-44")
    p.add_argument("--pooling", choices=("mean", "cls"), default="mean",
                   help="mean of the token states, or the first ([CLS]) token's state")
    p.add_argument("--layer", type=int, default=-1, help="hidden state index (0 = embeddings, -1 = last)")
    p.add_argument("--max-length", type=int, default=None, help="default: the task's max length, capped by the model")
    p.add_argument("--limit-train", type=int, default=None, help="subsample this many training examples per seed")
    p.add_argument("--batch-size", type=int, default=8, help="texts per forward pass when extracting features")
    p.add_argument("--results", default="results", metavar="DIR", help="results store (default results/)")
    p.add_argument("--overwrite", action="store_true", help="redo seeds that already have a result")

    add_task_arguments(p)
    _common(p)
    p.set_defaults(func=run_probe)


def _add_needle(sub) -> None:
    """`analyze needle generate|run`: the needle-in-a-haystack data and probe."""
    needle = sub.add_parser("needle", help="needle-in-a-haystack data and probe (paper Appendix I)",
                            description="Appendix I's needle-in-a-haystack test: `generate` writes the examples, "
                            "`run` trains a probe on a frozen encoder and reports accuracy by length and position.")
    nsub = needle.add_subparsers(dest="needle_command", metavar="STEP", required=True)
    p = nsub.add_parser("generate", help="write DIR/needle.jsonl from a French biomedical text folder",
                        description="Appendix I's needle set. Lengths count the evaluated model's tokens (pass it as "
                        "--tokenizer) and include the query and special tokens, so an L-token example fits an "
                        "L-token context untruncated; --length-unit words counts whitespace words instead. Size: "
                        "--examples (probe inputs, default 1500 = the paper's '1500 balanced positive/negative "
                        "pairs' read as 1500 (query, document) inputs) or --pairs (positive/negative pairs, each "
                        "two examples).")
    p.add_argument("--haystacks", required=True, metavar="DIR", help=".jsonl[.gz] records with 'text', or .txt files")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for needle.jsonl")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--examples", type=int, default=None,
                      help="probe inputs, half positive, half negative (even; default 1500)")
    size.add_argument("--pairs", type=int, default=None,
                      help="positive/negative pairs (same haystack and query, one fact apart); examples = 2 x pairs")
    p.add_argument("--n", type=int, default=None, help=argparse.SUPPRESS)  # ambiguous: refused with a hint
    p.add_argument("--lengths", default="512,1024,2048,4096,8192", help="haystack lengths, comma-separated")
    p.add_argument("--seed", type=int, default=0, help="seed of the haystack, fact and position draws")
    p.add_argument("--tokenizer", metavar="M", help="the evaluated model (or a tokenizer folder): lengths count its "
                   "tokens, query and special tokens included (required unless --length-unit words)")
    p.add_argument("--length-unit", choices=("tokens", "words"), default="tokens",
                   help="tokens of --tokenizer (default) or whitespace words (fewer than subword tokens)")
    p.set_defaults(func=run_needle_generate)
    p = nsub.add_parser("run", help="frozen encoder + MLP probe on CLS; accuracy by length and position",
                        description="Encode the needle set once with the frozen model, train an MLP probe on the "
                        "[CLS] features per seed and report accuracy by haystack length and needle position.")
    p.add_argument("--model", required=True, help="alias, hub id or local model folder (as for `biobench eval`)")
    p.add_argument("--data", required=True, metavar="DIR", help="folder holding needle.jsonl")
    p.add_argument("--out", metavar="DIR", help="default: DATA/runs/<model-slug>")
    p.add_argument("--seeds", default="42", help="probe seeds (default 42)")
    p.add_argument("--epochs", type=int, default=3, help="probe training epochs")
    p.add_argument("--lr", type=float, default=2e-5, help="probe learning rate")
    p.add_argument("--batch-size", type=int, default=4, help="probe batch size (default 4)")
    p.add_argument("--encode-batch-size", type=int, default=8, help="texts per forward pass of the frozen encoder")
    p.add_argument("--max-length", type=int, default=None, help="default: the model's context")
    p.add_argument("--lengths", default=None, help="only these haystack lengths (e.g. 512,1024)")
    _common(p)
    p.set_defaults(func=run_needle)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: cuda when available)")


def _write_json(path: Path, data: Any) -> None:
    atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _cka_texts(args) -> tuple[list[str], dict[int, Any], list[dict[str, Any]], list[int]]:
    """(the sampled texts, per seed their rows in that list, the sources, the seeds): analysis.cka.sample_texts."""
    # lazy: loads numpy, scipy.special, which `biobench --help` does not
    from biobench.analysis import cka

    seeds = parse_ranges(args.sample_seeds, "--sample-seeds")
    return (*cka.sample_texts(args.texts, args.n, seeds, args.data_dir), seeds)


def _layer_features(name: str, texts: list[str], args, device: str):
    # lazy: loads numpy, which `biobench --help` does not
    from biobench.analysis import features

    return features.model_layer_features(name, texts, args.max_length, args.batch_size, device)


def run_cka(args) -> int:
    # lazy: loads numpy, scipy.special, which `biobench --help` does not
    from biobench.analysis import cka, plots

    texts, samples, sources, seeds = _cka_texts(args)
    device = _device(args.device)
    names = {"a": args.models[0], "b": args.models[1], "noise": args.noise}
    feats, ids = {}, {}
    for role, name in names.items():
        if name is None:
            continue
        feats[role], ids[role] = _layer_features(name, texts, args, device)
        if role == "b" and "a" in feats:
            cka.layer_pairs(len(feats["a"]), len(feats["b"]), args.align_relative)  # fail before the noise model
    report = cka.cka_report(feats, "a", "b", "noise" if args.noise else None, samples, args.align_relative,
                            args.include_embeddings)
    report = {"schema": report.pop("schema"), "models": ids, "texts": sources,
              "n": int(len(next(iter(samples.values())))), "sample_seeds": seeds, "max_length": args.max_length,
              **report}
    out = Path(args.out)
    _write_json(out / "cka.json", report)
    plots.plot_cka(report, out / "cka.png")
    for row in [report["embeddings"], *report["layers"]]:
        ratio = f"  ratio {row['ratio']:.2f}" if row["ratio"] is not None else ""
        name = "embeddings" if row["layer"] == "embeddings" else f"layer {row['layer']:>2}"
        print(f"{name:>10}: CKA {row['cka']:.4f}  divergence {row['divergence']:.4f}{ratio}")
    print("Table 4: " + cka.table4_row(report))
    print(f"wrote {out / 'cka.json'} and {out / 'cka.png'}")
    return 0


def run_cka_trajectory(args) -> int:
    # lazy: loads numpy, scipy.special, which `biobench --help` does not
    from biobench.analysis import cka, plots

    run = Path(args.run)
    checkpoints = cka.run_checkpoints(run)
    start = cka.start_model(run, checkpoints, args.start)
    texts, samples, sources, seeds = _cka_texts(args)
    device = _device(args.device)
    start_feats, start_id = _layer_features(start, texts, args, device)
    points = []
    for ckpt in checkpoints:
        feats, _ = _layer_features(ckpt["path"], texts, args, device)
        point = {**ckpt, **cka.trajectory_point(start_feats, feats, samples, args.include_embeddings)}
        points.append(point)
        print(f"{ckpt['checkpoint']:>14} ({ckpt['tokens']} tokens): mean divergence {point['mean_divergence']:.4f} "
              f"[{point['ci_low']:.4f}, {point['ci_high']:.4f}]")
    report = {"schema": "biobench.cka-trajectory/1", "run": str(run), "start": start_id, "texts": sources,
              "n": int(len(next(iter(samples.values())))), "sample_seeds": seeds, "max_length": args.max_length,
              "layers_averaged": ("embeddings + " if args.include_embeddings else "") + "transformer layers",
              "points": points}
    out = Path(args.out) if args.out else run
    _write_json(out / "cka_trajectory.json", report)
    plots.plot_cka_trajectory(report, out / "cka_trajectory.png")
    print(f"wrote {out / 'cka_trajectory.json'} and {out / 'cka_trajectory.png'}")
    return 0


def run_transplant(args) -> int:
    # lazy: `biobench --help` does not import it (startup time)
    from biobench.analysis.transplant import transplant

    layers = parse_ranges(args.layers, "--layers")
    record = transplant(args.source, args.target, layers, args.component, args.out)
    print(f"copied {record['n_tensors']} tensors ({record['n_params']:,} parameters) of layers "
          f"{args.layers} [{args.component}] from {args.source} into {args.target} -> {args.out}")
    return 0


def run_probe(args) -> int:
    # lazy: loads numpy, which `biobench --help` does not
    from biobench.analysis import probe

    # lazy: tests patch it on its module
    from biobench.tasks.loading import load_task

    # lazy: tests patch it on its module
    from biobench.tasks.registry import get_spec

    spec = get_spec(args.task, args.task_file)
    probe.evaluate(args.model, spec, load_task(spec, args.data_dir), parse_ranges(args.seeds, "--seeds"),
                   args.results, pooling=args.pooling, layer=args.layer, max_length=args.max_length,
                   limit_train=args.limit_train, batch_size=args.batch_size, overwrite=args.overwrite,
                   device=_device(args.device))
    return 0


def _needle_pairs(args) -> int:
    if args.n is not None:
        raise ConfigError(f"--n {args.n} is ambiguous: pass --examples {args.n} (probe inputs) or --pairs {args.n} "
                          "(positive/negative pairs, two examples each)")
    if args.pairs is not None:
        return args.pairs
    examples = 1500 if args.examples is None else args.examples
    if examples < 2 or examples % 2:
        raise ConfigError(f"--examples {examples}: the set is made of positive/negative pairs, so it must be even "
                          "and >= 2")
    return examples // 2


def run_needle_generate(args) -> int:
    # lazy: `biobench --help` does not import it (startup time)
    from biobench.tasks import needle

    n_pairs = _needle_pairs(args)
    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    count = reserve = tokenizer_source = None
    if args.length_unit == "tokens":
        if not args.tokenizer:
            raise ConfigError("needle lengths are counted in the evaluated model's tokens: pass --tokenizer MODEL "
                              "(the model you will run), or --length-unit words to count whitespace words")
        # lazy: `biobench --help` does not import it (startup time)
        from biobench.models import resolve_model
        from transformers import AutoTokenizer

        folder = Path(args.tokenizer)
        tokenizer_source = str(folder.resolve()) if (folder / "tokenizer_config.json").is_file() else resolve_model(args.tokenizer).source
        tok = AutoTokenizer.from_pretrained(tokenizer_source)
        tok.model_max_length = 10**9  # counting only: silence the "longer than the model" warning
        specials = tok.num_special_tokens_to_add(pair=True)

        def count(text: str) -> int:
            return len(tok(text, add_special_tokens=False)["input_ids"])

        def reserve(query: str) -> int:
            return count(query) + specials
    elif args.tokenizer:
        raise ConfigError("--tokenizer and --length-unit words contradict each other; drop one")

    texts = needle.read_texts(args.haystacks)
    rows = needle.generate(texts, n_pairs=n_pairs, lengths=lengths, seed=args.seed, count=count, source=args.haystacks,
                           reserve=reserve)
    out = Path(args.out)
    needle.write_jsonl(rows, out / "needle.jsonl")
    meta = {"schema": "biobench.needle-data/2", "haystacks": str(args.haystacks), "n_examples": len(rows),
            "n_pairs": n_pairs, "lengths": lengths, "seed": args.seed, "length_unit": rows[0]["length_unit"],
            "length_counts": "query + special tokens + document" if reserve is not None else "document words",
            "tokenizer": tokenizer_source, "templates": str(needle.TEMPLATES_PATH.name),
            "negatives": "every slot changed",
            "splits": {s: sum(r["split"] == s for r in rows) for s in ("train", "dev", "test")}}
    _write_json(out / "needle_meta.json", meta)
    print(f"wrote {len(rows)} examples ({n_pairs} positive/negative pairs; {meta['splits']}) to {out / 'needle.jsonl'}")
    return 0


def run_needle(args) -> int:
    # lazy: loads numpy, which `biobench --help` does not
    from biobench.analysis import needle_probe

    # lazy: `biobench --help` does not import it (startup time)
    from biobench.tasks import needle

    rows = needle.read_jsonl(Path(args.data) / "needle.jsonl")
    if args.lengths:
        keep = set(parse_ranges(args.lengths, "--lengths"))
        rows = [r for r in rows if r["length"] in keep]
        if not rows:
            raise ConfigError(f"--lengths {args.lengths}: no example of these lengths in {args.data}")
    seeds = parse_ranges(args.seeds, "--seeds")
    config = needle_probe.ProbeConfig(epochs=args.epochs, lr=args.lr, batch_size=args.batch_size)
    result, out = needle_probe.run_needle(args.model, args.data, rows, seeds, config, max_length=args.max_length,
                                          encode_batch_size=args.encode_batch_size, device=_device(args.device),
                                          out=args.out, note=lambda line: print(line, file=sys.stderr))
    lengths = "  ".join(f"{k}: {v:.3f}" for k, v in result["by_length"].items())
    positions = "  ".join(f"{k}: {v:.3f}" for k, v in result["by_position"].items())
    print(f"test accuracy {result['accuracy']:.3f} (dev {result['dev_accuracy']:.3f}); by length {lengths}; "
          f"by position {positions}")
    print(f"wrote {out / 'needle_results.json'}")
    return 0
