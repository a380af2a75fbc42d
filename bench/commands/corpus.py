"""`biobench corpus`: build a token store once (in parallel, resumable), show it, plan a mix of stores."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from biobench.api import corpus
from biobench.api.pretraining import resolve_geometry
from biobench.commands.pretrain import config_file, flag_settings
from biobench.errors import ConfigError
from biobench.runtime import launch
from biobench.runtime.launch import add_launcher_arguments
from biobench.training import corpus as raw_corpus
from biobench.training import mixture
from biobench.training.config import config_defaults

EPILOG = """examples:
  biobench corpus build ../shared/data/pretrain-fr --tokenizer almanach/moderncamembert-base --out stores/e3c-fr --workers 4
  biobench corpus info stores/e3c-fr
  biobench corpus build --mix examples/mixes/paper-fr.toml --workers 16
  biobench corpus plan examples/mixes/paper-fr.toml --tokens 10B
  biobench pretrain --model almanach/moderncamembert-base --corpus stores/e3c-fr --tokens 10B --out runs/fr

A store is tokenised once and read memory-mapped by every rank; a killed build rerun with the same command
resumes where it stopped (docs/PRETRAINING.md)."""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("corpus", help="token stores for pretraining: build, info, plan a mix",
                              description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="corpus_command", required=True)
    b = sub.add_parser("build", help="tokenise sources into a token store (resumable)",
                       description="Tokenise SOURCEs into a token store: work units (byte ranges, row groups) tokenised "
                       "by --workers processes, each ending with a completion marker, so a killed build rerun with "
                       "the same command resumes; the store is the same bytes whatever --workers.")
    b.add_argument("sources", nargs="*", metavar="SOURCE",
                   help="text file, JSONL(.gz), parquet, a folder of them, or a hub dataset id")
    b.add_argument("--mix", metavar="MIX.toml", help="build every store of a mix file that is not built yet, each "
                   "from its source's build_from (a path relative to the mix file, or a hub id), with its weight "
                   "and text fields (instead of SOURCE... --out)")
    b.add_argument("--tokenizer", metavar="MODEL", help="the model whose tokenizer is used: alias, folder or hub "
                   "id, as --model takes them (with --mix: default the mix file's `tokenizer`)")
    b.add_argument("--out", help="the store folder")
    b.add_argument("--text-field", default="text", help="JSON field / parquet column holding the text")
    b.add_argument("--unit-mb", type=float, default=64, help="text per work unit, in MiB (default 64): what a "
                   "worker holds and a killed build redoes")
    b.add_argument("--weight-field", metavar="F", help="also record each document's numeric field F (JSONL field or "
                   "parquet column: a finite number from 0 to 1000), which a mix source's `weight = \"F\"` turns "
                   "into deterministic repeat counts (docs/PRETRAINING.md)")
    b.add_argument("--hub-config", metavar="NAME", help="a hub dataset SOURCE's config (subset), as load_dataset's "
                   "name: the files its README's `configs:` gives the train split, else its folder NAME/ (its train/ "
                   "files when it has them: the hub's parquet export, revision @refs/convert/parquet)")
    b.add_argument("--data-files", nargs="+", metavar="GLOB", help="only these files of a hub dataset SOURCE, as "
                   "load_dataset's data_files: globs of paths in the repo ('*' within a folder, '**' across), "
                   "narrowing --hub-config's files when both are given; recorded in the manifest")
    b.add_argument("--dry-run", action="store_true", help="list the work units (done, being tokenised and by whom, "
                   "to do) and write nothing: the progress of a build, e.g. of a --launcher slurm array")
    b.add_argument("--claim-units", action="store_true", help="share the units with other processes building the "
                   "same --out by claims (what each --launcher slurm element runs): a killed process's unit is "
                   "redone by the next one once its claim expires")
    b.add_argument("--claim-seconds", type=float, default=300.0, metavar="S", help="with --claim-units: how long a "
                   "claim lives without renewal, i.e. how late a killed process's unit is redone (default 300)")
    # --workers: tokenising processes here (--launcher local, the default), array elements with --launcher slurm
    add_launcher_arguments(b)
    b.set_defaults(gpus_per_task=0)  # tokenising needs no GPU
    i = sub.add_parser("info", help="a store's manifest, checked against its shards",
                       description="Print a token store's manifest (sources, tokenizer, counts), after checking it and "
                       "its shards' sizes and sha256 against it.")
    i.add_argument("store", help="the store folder")
    i.add_argument("--no-verify", action="store_true", help="check sizes only, not the shards' sha256")
    pl = sub.add_parser("plan", help="a mix file's per-source table for a run",
                        description="Per source of a mix file: tokens available, passes, tokens used, target and "
                        "realised share for the run `biobench pretrain` makes with the same settings (both phases: "
                        "--tokens of phase 1 in whole batches, then the decay), the very table pretrain prints; a "
                        "source that cannot fill its share within its max_passes is one line naming it (exit "
                        "status 1). Reads manifests and shard sizes only.")
    pl.add_argument("mix", metavar="MIX.toml", nargs="?",
                    help="the mix file ([[source]] tables: name, store, share or tokens, max_passes); default: "
                    "--config's corpus")
    pl.add_argument("--config", type=Path, metavar="RUN.toml", help="the run's pretraining config (pretrain "
                    "--config, or a run's pretrain_config.toml): its tokens, batch, sequence length, decay ratio "
                    "and corpus; the flags below override it")
    pl.add_argument("--tokens", help="phase-1 tokens of the run (e.g. 10B), as pretrain --tokens")
    pl.add_argument("--seq-len", help="packed sequence length (default: pretrain's, 8192)")
    pl.add_argument("--batch-size", help="global batch in sequences (default: pretrain's, 384)")
    pl.add_argument("--decay-ratio", help="decay phase over phase 1 (default: pretrain's, 0.1)")
    pl.add_argument("--heldout-docs", help="documents per source held out of training (pretrain --heldout-docs)")
    pl.add_argument("--json", action="store_true", help="the rows as JSON")
    sa = sub.add_parser("sample", help="decode what a run reads at a position",
                        description="The packed sequences a run reads at --position .. --position + --n - 1 (a "
                        "step of the run is --batch-size positions), built as pretrain builds them (plan, seeds, "
                        "per-pass shuffles), decoded with --tokenizer.")
    sa.add_argument("corpus", metavar="STORE|MIX.toml", nargs="?", help="a store or a mix file (default: --config's "
                    "corpus)")
    sa.add_argument("--tokenizer", metavar="MODEL", help="the model whose tokenizer decodes (default: --config's "
                    "model, or the mix file's tokenizer)")
    sa.add_argument("--n", type=int, default=3, help="sequences to show (default 3)")
    sa.add_argument("--position", type=int, default=0, help="the first position (default 0)")
    sa.add_argument("--json", action="store_true", help="the sequences as JSON (ids and text)")
    sa.add_argument("--config", type=Path, metavar="RUN.toml", help="the run's pretraining config, as corpus plan "
                    "takes it; the flags below override it")
    for flag, text in (("--tokens", "phase-1 tokens of the run"), ("--seq-len", "sequence length (default 8192)"),
                       ("--batch-size", "global batch (default 384)"), ("--decay-ratio", "decay over phase 1"),
                       ("--data-seed", "the run's data seed (default: its seed)"),
                       ("--heldout-docs", "documents per source held out of training")):
        sa.add_argument(flag, help=text)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.corpus_command == "build":
        return build(args, corpus)
    if args.corpus_command == "info":
        print(corpus.store_info(args.store, verify=not args.no_verify))
        return 0

    if args.corpus_command == "sample":
        return sample(args, corpus)
    table, short, rows = plan(args, corpus)
    print(json.dumps(rows, indent=1) if args.json else table)
    for line in short:
        print(line, file=sys.stderr)
    return 1 if short else 0


def plan(args: argparse.Namespace, corpus) -> tuple[str, list[str], list[dict[str, Any]]]:
    """`corpus plan`: the run's settings as pretrain resolves them (a --config file, flags over it, the same
    geometry defaults), then the plan of what that run reads."""
    mix, run = run_settings(args, args.mix, "corpus plan")
    return corpus.plan(mix, run["tokens"], run["seq_len"], run["batch_size"], run["decay_ratio"], run["heldout_docs"])


def run_settings(args: argparse.Namespace, given: str | None, command: str) -> tuple[str, dict[str, Any]]:
    """(corpus, the run's settings) as pretrain resolves them: a --config file, flags over it, pretrain's
    geometry defaults (resolve_geometry) and decay ratio; the data seed is the seed unless given."""
    settings = config_file(args.config) if args.config else {}
    settings.update(flag_settings(args))
    source = given or settings.get("corpus")
    if not source or settings.get("tokens") is None:
        raise ConfigError(f"{command} needs a mix file and --tokens, as arguments or in --config")
    geometry = resolve_geometry(str(settings.get("model") or ""), settings.get("device"),
                                settings.get("batch_size"), settings.get("seq_len"), None)
    defaults = config_defaults()
    seed = settings.get("seed", defaults["seed"])
    data_seed = settings.get("data_seed")
    return str(source), {"tokens": settings["tokens"], "seq_len": geometry["seq_len"],
                         "batch_size": geometry["batch_size"], "model": settings.get("model"),
                         "decay_ratio": settings.get("decay_ratio", defaults["decay_ratio"]),
                         "data_seed": seed if data_seed is None else data_seed,
                         "heldout_docs": int(settings.get("heldout_docs") or 0)}


def sample(args: argparse.Namespace, corpus) -> int:
    """`corpus sample`: what the run reads at a position, decoded."""
    source, run = run_settings(args, args.corpus, "corpus sample")
    tokenizer = args.tokenizer or run["model"]
    if tokenizer is None and source.lower().endswith(".toml"):
        tokenizer = mixture_tokenizer(source)
    if tokenizer is None:
        raise ConfigError("corpus sample needs --tokenizer MODEL (or a --config with a model, or a mix file's "
                          "tokenizer)")
    rows = corpus.sample(source, str(tokenizer), run["tokens"], run["seq_len"], run["batch_size"],
                         run["decay_ratio"], run["data_seed"], args.position, args.n, run["heldout_docs"])
    if args.json:
        print(json.dumps(rows, indent=1, ensure_ascii=False))
        return 0
    for row in rows:
        print(f"position {row['position']:,} (step {row['step']:,}, source {row['source']}, pass {row['pass']}, "
              f"{len(row['ids']):,} tokens):")
        print("  " + row["text"][:2000].replace("\n", "\n  "))
    return 0


def mixture_tokenizer(path: str) -> str | None:
    return mixture.read_mix(path).tokenizer


def build(args: argparse.Namespace, corpus) -> int:
    def say(line: str) -> None:
        print(line, flush=True)

    launch.check_options(args)  # --slurm-arg, --time: refused under --dry-run as the submit refuses them
    selection = raw_corpus.hub_selection(args.hub_config, args.data_files, "--hub-config/--data-files")
    if args.mix is not None:
        if args.sources or args.out or args.launcher == "slurm" or args.claim_units or args.dry_run or selection:
            raise ConfigError("--mix builds the mix's stores here, from its build_from entries (and their hub_config "
                              "and data_files): give no SOURCE, --out, --launcher slurm, --claim-units, --dry-run, "
                              "--hub-config or --data-files with it")
        built = corpus.build_mix(args.mix, args.tokenizer, workers=args.workers or 1, unit_mb=args.unit_mb, log=say)
        print(f"mix {args.mix}: {sum(now for _, _, now in built)} store(s) built now, {len(built)} in all; plan "
              f"the run: biobench corpus plan {args.mix} --tokens N (or --config RUN.toml)")
        return 0
    if not args.sources or not args.out or not args.tokenizer:
        raise ConfigError("corpus build needs SOURCE..., --tokenizer and --out (or --mix MIX.toml)")

    if args.dry_run:
        line, units = corpus.build_progress(args.sources, args.tokenizer, args.out, args.text_field, args.unit_mb,
                                            selection)
        print(line)
        for unit in units:
            if unit.holder is not None:
                print(f"  unit {unit.index:6d}: being tokenised by {unit.holder}")
        return 0
    if args.launcher == "slurm":
        if args.claim_units:
            raise ConfigError("--claim-units is what each --launcher slurm element runs; give one or the other")
        job, log_dir, n_units = corpus.launch_build(args.sources, args.tokenizer, args.out, args, args.text_field,
                                                    args.unit_mb, args.claim_seconds, args.weight_field, selection)
        workers = 8 if args.workers is None else args.workers
        print(f"submitted SLURM array {job}: {workers} worker(s) on {n_units} work unit(s), each claiming the next "
              "unfinished unit")
        print(f"logs: {launch.log_files(log_dir, job, workers)} and .err (launch.json beside them)")
        sources = " ".join(args.sources)
        chosen = " ".join(shlex.quote(f) for f in selection.flags())
        print(f"progress: biobench corpus build {sources} --tokenizer {args.tokenizer} --out {args.out} "
              f"{chosen + ' ' if chosen else ''}--dry-run")
        return 0
    if args.claim_units:
        if args.workers not in (None, 1):
            raise ConfigError("--claim-units tokenises in this process: run more processes, not --workers")
        out = corpus.build_claimed(args.sources, args.tokenizer, args.out, args.text_field, args.unit_mb,
                                   args.claim_seconds, log=say, weight_field=args.weight_field, selection=selection)
    else:
        out = corpus.build_store(args.sources, args.tokenizer, args.out, workers=args.workers or 1,
                                 text_field=args.text_field, unit_mb=args.unit_mb, log=say,
                                 weight_field=args.weight_field, selection=selection)
    print(corpus.store_info(out, verify=False))
    return 0
