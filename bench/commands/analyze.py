"""`biobench analyze cka|transplant|probe|needle`: the paper's analyses (§3.4, §4.4, §5, Appendix I)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from biobench.analysis import cka, features, needle_probe, options, plots, probe
from biobench.analysis.transplant import transplant
from biobench.api.pretraining import legacy_run
from biobench.errors import ConfigError
from biobench.models import resolve_model
from biobench.ranges import parse_ranges
from biobench.runtime.device import resolve_device as _device
from biobench.runtime.files import atomic_write
from biobench.runtime.ownership import check_output_folder
from biobench.tasks import needle
from biobench.tasks.loading import load_task
from biobench.tasks.registry import TaskCatalogue

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
    parser = subparsers.add_parser("analyze", description=__doc__)
    sub = parser.add_subparsers(dest="analysis", metavar="ANALYSIS", required=True)
    # each kind's options are declared once (analysis/options.py): a study's [[analysis]] tables are checked
    # against the same declarations
    _add(sub, options.CKA, run_cka, description=CKA_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add(sub, options.CKA_TRAJECTORY, run_cka_trajectory)
    _add(sub, options.TRANSPLANT, run_transplant)
    _add(sub, options.PROBE, run_probe)
    needle = sub.add_parser("needle", help="needle-in-a-haystack data and probe (paper Appendix I)",
                            description="Appendix I's needle-in-a-haystack test: `generate` writes the examples, "
                            "`run` trains a probe on a frozen encoder and reports accuracy by length and position.")
    nsub = needle.add_subparsers(dest="needle_command", metavar="STEP", required=True)
    _add(nsub, options.NEEDLE_GENERATE, run_needle_generate)
    _add(nsub, options.NEEDLE, run_needle)


def _add(sub, spec: options.AnalysisSpec, func, **kwargs) -> None:
    p = sub.add_parser(spec.words[-1], help=spec.help, description=kwargs.pop("description", spec.description),
                       **kwargs)
    options.add_options(p, spec)
    p.set_defaults(func=func)


ANALYSIS_FILES = ("cka.json", "cka_trajectory.json", "needle.jsonl", "needle_meta.json", "needle_results.json",
                  "transplant.json")


def _out_folder(path: str | Path) -> Path:
    """`--out` checked before any work (runtime.ownership): new, empty, or a folder biobench made (a marker, or an
    earlier biobench's analysis files or run folder); any other folder of the user's is refused in one line."""
    def legacy(folder: Path) -> bool:
        return legacy_run(folder) or any((folder / name).is_file() for name in ANALYSIS_FILES)

    return check_output_folder(path, "--out", "analysis", legacy=legacy)


def _write_json(path: Path, data: Any) -> None:
    atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _cka_texts(args) -> tuple[list[str], dict[int, Any], list[dict[str, Any]], list[int]]:
    """(the sampled texts, per seed their rows in that list, the sources, the seeds): analysis.cka.sample_texts."""
    seeds = parse_ranges(args.sample_seeds, "--sample-seeds")
    return (*cka.sample_texts(args.texts, args.n, seeds, args.data_dir), seeds)


def _layer_features(name: str, texts: list[str], args, device: str):
    return features.model_layer_features(name, texts, args.max_length, args.batch_size, device)


def run_cka(args) -> int:
    out = _out_folder(args.out)
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
    run = Path(args.run)
    out = _out_folder(args.out) if args.out else run
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
    _write_json(out / "cka_trajectory.json", report)
    plots.plot_cka_trajectory(report, out / "cka_trajectory.png")
    print(f"wrote {out / 'cka_trajectory.json'} and {out / 'cka_trajectory.png'}")
    return 0


def run_transplant(args) -> int:
    layers = parse_ranges(args.layers, "--layers")
    record = transplant(args.source, args.target, layers, args.component, args.out)
    print(f"copied {record['n_tensors']} tensors ({record['n_params']:,} parameters) of layers "
          f"{args.layers} [{args.component}] from {args.source} into {args.target} -> {args.out}")
    return 0


def run_probe(args) -> int:
    spec = TaskCatalogue.build(args.task_file).get(args.task)
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
    n_pairs = _needle_pairs(args)
    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    count = reserve = tokenizer_source = None
    if args.length_unit == "tokens":
        if not args.tokenizer:
            raise ConfigError("needle lengths are counted in the evaluated model's tokens: pass --tokenizer MODEL "
                              "(the model you will run), or --length-unit words to count whitespace words")
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

    out = _out_folder(args.out)
    texts = needle.read_texts(args.haystacks)
    rows = needle.generate(texts, n_pairs=n_pairs, lengths=lengths, seed=args.seed, count=count, source=args.haystacks,
                           reserve=reserve)
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
    rows = needle.read_jsonl(Path(args.data) / "needle.jsonl")
    if args.lengths:
        keep = set(parse_ranges(args.lengths, "--lengths"))
        rows = [r for r in rows if r["length"] in keep]
        if not rows:
            raise ConfigError(f"--lengths {args.lengths}: no example of these lengths in {args.data}")
    seeds = parse_ranges(args.seeds, "--seeds")
    if args.out:
        _out_folder(args.out)
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
