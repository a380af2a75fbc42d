"""Token stores and mixes from Python: `build_store`, `store_info`, `plan`. `biobench corpus` calls these."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biobench.errors import ConfigError
from biobench.eval.claims import RunClaims, read_claim
from biobench.models import resolve_model
from biobench.ranges import Bounds
from biobench.runtime import launch
from biobench.runtime.interrupts import WALL_CLOCK_SIGNALS, Abandoned, stop_on_signal
from biobench.runtime.ownership import check_output_folder
from biobench.training import corpus as raw_corpus
from biobench.training import mixture, schedules, token_store


def tokenizer_source(model: str) -> str:
    """What `--tokenizer` names (an alias, a model folder, a tokenizer-only folder or a hub id) as the folder or hub
    id AutoTokenizer reads; the same resolution `--model` uses."""
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve())

    return resolve_model(model).source


def _checked_out(out: str | Path) -> Path:
    """The store folder: a new or empty one (created and marked), or a store biobench made (finished or not);
    any other folder is refused in one line (runtime.ownership), so nothing of the user's is taken for a build."""
    return check_output_folder(out, "--out", "token store", legacy=token_store.legacy_store)


def build_store(sources: list[str], tokenizer: str, out: str | Path, workers: int = 1, text_field: str = "text",
                unit_mb: float = 64, log: Callable[[str], None] | None = None,
                weight_field: str | None = None, selection: raw_corpus.HubSelection | None = None) -> Path:
    """Tokenise `sources` (text, JSONL(.gz), parquet files or folders, hub dataset ids: all their data files, or
    those `selection` names, training.corpus.HubSelection) into a token store at `out` with `workers` processes;
    a killed build rerun with the same arguments resumes. Returns the store folder."""
    Bounds(1, 256, integer=True).check(workers, "--workers")
    Bounds(0.001, 4096).check(unit_mb, "--unit-mb")
    out = _checked_out(out)
    token_store.check_same_sources(out, list(sources), text_field, weight_field, selection)
    return token_store.build(list(sources), out, tokenizer_source(tokenizer), workers=workers, text_field=text_field,
                             weight_field=weight_field, unit_bytes=int(unit_mb * 2**20), log=log, selection=selection)


def build_mix(mix_file: str | Path, tokenizer: str | None = None, workers: int = 1, unit_mb: float = 64,
              log: Callable[[str], None] | None = None) -> list[tuple[str, Path, bool]]:
    """`corpus build --mix`: build every store of the mix that is not finished, each from its source's
    `build_from` (a path relative to the mix file, or a hub id) with the mix's tokenizer (or `tokenizer`), its
    weight field and text field. Every source is checked before anything is built (a store to build with no
    `build_from`, a path that does not exist, no tokenizer): one message listing them. Returns (name, store,
    built now) per source."""
    mix = mixture.read_mix(mix_file)
    tok = tokenizer or mix.tokenizer
    missing = mix.missing()
    problems = []
    for source in missing:
        what = source.build_source(mix.path.parent)
        if what is None:
            problems.append(f"  {source.name}: no build_from (a path relative to the mix file, or a hub id)")
        elif what.startswith("/") and not Path(what).exists():
            problems.append(f"  {source.name}: build_from {source.build_from} is not there ({what})")
    if missing and tok is None:
        problems.append("  no tokenizer: give --tokenizer MODEL or `tokenizer = \"MODEL\"` in the mix file")
    if problems:
        raise ConfigError(f"mix file {mix.path}: cannot build {len(missing)} store(s):\n" + "\n".join(problems))
    say = log or (lambda _line: None)
    done = []
    for source in mix.sources:
        if source not in missing:
            say(f"corpus build --mix: {source.name}: {source.store} is built")
            done.append((source.name, source.store, False))
            continue
        say(f"corpus build --mix: {source.name}: {mix.build_command(source, tok)}")
        assert tok is not None
        build_store([str(source.build_source(mix.path.parent))], tok, source.store, workers=workers,
                    text_field=source.text_field, unit_mb=unit_mb, log=log, weight_field=source.weight,
                    selection=source.selection)
        done.append((source.name, source.store, True))
    return done


def _unit_key(plan: Any, index: int) -> Path:
    """The path whose claim (bench/eval/claims: `work/NNNNNN.claim/`) guards work unit `index`."""
    return plan.out / "work" / f"{index:06d}.json"


def build_claimed(sources: list[str], tokenizer: str, out: str | Path, text_field: str = "text", unit_mb: float = 64,
                  claim_s: float = 300.0, poll_s: float = 2.0, log: Callable[[str], None] | None = None,
                  weight_field: str | None = None, selection: raw_corpus.HubSelection | None = None) -> Path:
    """One of several processes building one store (what each element of `corpus build --launcher slurm` runs):
    each work unit is claimed first (bench/eval/claims, the leases eval's runs use), so every unit is tokenised
    once while the processes live; a process killed or requeued leaves its unit's claim to expire (`claim_s`, at
    once on the same machine) and the next process to pass redoes it. A unit's bytes depend on the unit alone,
    so the store is byte-identical to a local build. SIGTERM/SIGUSR1 (scancel, a requeue, the wall clock) give
    the unit in hand up and release its claim. The last process to see every unit done writes the manifest."""
    import signal
    import time


    Bounds(0.001, 4096).check(unit_mb, "--unit-mb")
    Bounds(1, 7 * 86400).check(claim_s, "--claim-seconds")
    say = log or (lambda _line: None)
    out = _checked_out(out)
    token_store.check_same_sources(out, list(sources), text_field, weight_field, selection)
    if (out / token_store.DONE).is_file():
        return out
    plan = token_store.prepare(list(sources), out, tokenizer_source(tokenizer), text_field=text_field,
                               unit_bytes=int(unit_mb * 2**20), weight_field=weight_field, selection=selection)
    claims = RunClaims(claim_s, warn=say)
    mine = 0
    try:
        with stop_on_signal(say, signals=(*WALL_CLOCK_SIGNALS, signal.SIGINT),
                            message="giving the work unit in hand up (its claim released for the next process)") as stop:
            while not plan.finished() and (todo := plan.todo()):
                if stop.requested:
                    raise Abandoned(stop.signal_name or "SIGTERM")
                took = False
                for index in todo:
                    key = _unit_key(plan, index)
                    with plan.sharing():
                        if plan.finished():
                            break
                        if plan.done(index) or not claims.claim(key):
                            continue
                        took, finished = True, False
                        try:
                            # looked for again once claimed (eval/claims' rule 3): the process that finished it may
                            # have removed its claim between our look and our claim, leaving it free to take
                            if not plan.done(index):
                                with stop.abandonable():
                                    plan.build_unit(index)
                                mine += 1
                            finished = True
                        finally:
                            claims.release(key, finished=finished, abandoned=None if finished else "stopped")
                if not took:  # the rest is held by other processes: wait for them (or for their claims to expire)
                    time.sleep(poll_s)
    except Abandoned as stopped:
        raise ConfigError(f"corpus build stopped by {stopped.signal_name}: {mine} unit(s) tokenised here; the others' "
                          "claims stay with them, this process's unit is free for the next one (rerun the command "
                          "to resume)") from None
    finally:
        claims.close()
    say(f"corpus build: {mine} of {len(plan.units)} work unit(s) tokenised by this process")
    return token_store.finish_once(plan)


@dataclass(frozen=True)
class UnitState:
    """One work unit as `corpus build --dry-run` shows it."""

    index: int
    done: bool
    holder: str | None  # who holds its claim ('host pid N (SLURM job J, array A_I)'), None when free


def build_progress(sources: list[str], tokenizer: str, out: str | Path, text_field: str = "text",
                   unit_mb: float = 64, selection: raw_corpus.HubSelection | None = None
                   ) -> tuple[str, list[UnitState]]:
    """`corpus build --dry-run`: the plan's units (from the sources alone; nothing is written), each done, held or
    to do, and a summary line."""

    out = Path(out)
    if (out / token_store.DONE).is_file():
        return f"{out}: finished token store (content id {token_store.store_id(out)})", []
    units = token_store.plan_units(list(sources), int(unit_mb * 2**20), selection)
    states = []
    for index in range(len(units)):
        done = token_store.unit_done(out, index)
        info = None if done else read_claim(out / token_store.WORK / f"{index:06d}.json")
        holder = info.holder.describe() if info is not None and info.held and info.holder else None
        states.append(UnitState(index, done, holder))
    n_done = sum(s.done for s in states)
    n_held = sum(s.holder is not None for s in states)
    started = "" if (out / token_store.WORK / "plan.json").is_file() else " (not started)"
    line = (f"{out}{started}: {len(units)} work unit(s): {n_done} done, {n_held} being tokenised, "
            f"{len(units) - n_done - n_held} to do")
    return line, states


def launch_build(sources: list[str], tokenizer: str, out: str | Path, settings: Any, text_field: str = "text",
                 unit_mb: float = 64, claim_s: float = 300.0, weight_field: str | None = None,
                 selection: raw_corpus.HubSelection | None = None) -> tuple[str, Path, int]:
    """`corpus build --launcher slurm`: plan the store now (the sources and the tokenizer checked before any job
    starts), then submit `settings.workers` array elements through the eval launcher (runtime.launch), each running
    this build with `--claim-units`. Returns (job id, log folder, number of units). `settings`: the launcher's
    parsed flags (runtime.launch.add_launcher_arguments)."""
    import contextlib
    from datetime import UTC, datetime


    for what, value in (("--out", out), ("--account", settings.account), ("--partition", settings.partition),
                        ("--log-dir", settings.log_dir), ("--text-field", text_field),
                        *(("SOURCE", s) for s in sources)):
        if value is not None:
            launch.check_text(value, what)
    workers = 8 if settings.workers is None else settings.workers
    if not 1 <= workers <= launch.MAX_WORKERS:
        raise ConfigError(f"--workers {workers}: give 1 to {launch.MAX_WORKERS}")
    for flag, value in (("--gpus-per-task", settings.gpus_per_task), ("--cpus-per-task", settings.cpus_per_task),
                        ("--array-parallelism", settings.array_parallelism)):
        if value is not None and not 0 <= value <= 10_000:
            raise ConfigError(f"{flag} {value}: give a number from 0 to 10000")
    time_min, extra = launch.minutes(settings.time), launch.slurm_args(settings.slurm_arg)
    Bounds(0.001, 4096).check(unit_mb, "--unit-mb")  # refused here, not in every element after the submit
    Bounds(1, 7 * 86400).check(claim_s, "--claim-seconds")
    launch.import_submitit()
    launch.check_slurm(settings.partition)
    # every path absolute: the elements start in the job's folder, not here
    sources = [str(Path(s).resolve()) if raw_corpus.is_local(s) else s for s in sources]
    out = _checked_out(Path(out).resolve())
    token_store.check_same_sources(out, sources, text_field, weight_field, selection)
    tok = tokenizer_source(tokenizer)
    plan = token_store.prepare(sources, out, tok, text_field=text_field, unit_bytes=int(unit_mb * 2**20),
                               weight_field=weight_field, selection=selection)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    log_dir = Path(settings.log_dir or Path("biobench-slurm") / f"corpus-{out.name}-{stamp}").resolve()
    argv = ["corpus", "build", *sources, "--tokenizer", tok, "--out", str(out), "--text-field", text_field,
            "--unit-mb", repr(unit_mb), "--claim-units", "--claim-seconds", repr(claim_s)]
    if weight_field is not None:
        argv += ["--weight-field", weight_field]
    argv += selection.flags() if selection else []
    made_log_dir = not log_dir.exists()
    try:
        job = launch.submit(launch.SlurmLaunch(
            argv, workers, log_dir, f"biobench-corpus-{out.name}"[:60], settings.partition, settings.account,
            settings.gpus_per_task, settings.cpus_per_task, time_min, settings.array_parallelism, extra,
            record={"store": str(out), "units": len(plan.units)}))
    except ConfigError:
        if made_log_dir:
            with contextlib.suppress(OSError):
                log_dir.rmdir()
        raise
    return job, log_dir, len(plan.units)


def store_info(store: str | Path, verify: bool = True) -> str:
    return token_store.describe(token_store.open_store(store, verify=verify))


def plan(mix_file: str | Path, tokens: int, seq_len: int, batch_size: int, decay_ratio: float, heldout_docs: int = 0,
         ) -> tuple[str, list[str], list[dict[str, Any]]]:
    """(table, lines naming the sources that cannot fill their share, rows) of a mix for the run `pretrain`
    makes of `tokens` phase-1 tokens, global batches of `batch_size` sequences of `seq_len`, and the decay
    (`decay_ratio` of phase 1): mixture.plan_run, the plan pretrain trains on, so both read alike token for token.
    Opens each store as pretrain does (manifest, shards' sizes: token_store.open_store, no sha256) and refuses
    stores of different tokenizers, which pretrain would refuse. `heldout_docs`: documents per source held out of
    training (pretrain --heldout-docs), left out of the plan as pretrain leaves them out."""
    if seq_len < 8:
        raise ConfigError(f"--seq-len {seq_len}: give at least 8 tokens")
    mix = mixture.read_mix(mix_file)
    mix.check_built()
    stores = [token_store.open_store(s.store, verify=False) for s in mix.sources]
    first = stores[0]
    for source, store in zip(mix.sources[1:], stores[1:], strict=True):
        if store.fingerprint != first.fingerprint:
            raise ConfigError(f"mix file {mix.path}: source '{source.name}' (store {store.path}) was built with "
                              f"another tokenizer than source '{mix.sources[0].name}' (fingerprint "
                              f"{store.fingerprint} vs {first.fingerprint}); one run reads one tokenizer: "
                              f"rebuild it with corpus build ... --tokenizer {first.tokenizer_name}")
    streams, dedup = mixture.source_streams(mix, stores, heldout_docs)
    available = [len(tokens) for tokens, _, _ in streams]
    # a budget beyond what the stores can give within their max_passes (its first phase alone) is refused here, in
    # one line, before the plan is sized by it (`--tokens 17T` over a few million tokens asked for 15.5 GiB, issue 58
    # item 6); within it, a source that cannot fill its share is the plan's own line
    capacity = sum(a * s.max_passes for a, s in zip(available, mix.sources, strict=True))
    if tokens > capacity:
        raise ConfigError(f"--tokens {tokens:,}: the mix's stores give at most {int(capacity):,} tokens within their "
                          "max_passes; lower --tokens, raise max_passes or add tokens to the stores")
    result = mixture.plan_run(mix, available, tokens, batch_size, seq_len, decay_ratio, dedup)
    return result.table(), result.short(), result.rows()


MAX_SAMPLES = 1000  # sequences one `corpus sample` decodes


def sample(source: str | Path, tokenizer: str, tokens: int, seq_len: int, batch_size: int, decay_ratio: float,
           data_seed: int, position: int = 0, n: int = 3, heldout_docs: int = 0) -> list[dict[str, Any]]:
    """`corpus sample`: the sequences a run reads at positions `position` .. `position + n - 1` (step = position
    // batch_size), built as pretrain builds its data (training/corpus_input.packed_corpus: the same plan, seeds
    and per-pass shuffles), each with its source, pass, token ids and decoded text. A store or a mix, not raw
    text (which pretrain first builds into a store)."""
    from types import SimpleNamespace

    # lazy: loads torch
    from biobench.training import corpus_input

    Bounds(1, MAX_SAMPLES, integer=True).check(n, "--n")
    Bounds(0, 1 << 40, integer=True).check(position, "--position")
    if corpus_input.kind(str(source)) == "raw":
        raise ConfigError(f"corpus sample reads a token store or a mix file; {source} is neither (build it first: "
                          "biobench corpus build)")
    tok = token_store.load_tokenizer(tokenizer_source(tokenizer))
    steps = schedules.phase_steps(tokens, batch_size, seq_len, decay_ratio)
    cfg = SimpleNamespace(corpus=str(source), seq_len=seq_len, tokens=tokens, batch_size=batch_size,
                          decay_ratio=decay_ratio, model=tokenizer, max_documents=None, text_field="text",
                          cache_dir=None, heldout_docs=heldout_docs)
    packed, _summary, _validation = corpus_input.packed_corpus(cfg, tok, True, sum(steps) * batch_size, data_seed,
                                                  lambda _line: None)
    rows = []
    for p in range(position, position + n):
        index = packed.at(p)
        if isinstance(packed, mixture.MixedCorpus):
            s = int(packed.plan.source_of[index])
            name, part = packed.plan.mix.sources[s].name, packed.parts[s]
            passes = int(packed.plan.index_in[index]) // part.n_sequences
        else:
            name, passes = Path(source).name, p // packed.n_sequences
        ids = packed.sequence_tokens(index).astype(int).tolist()
        rows.append({"position": p, "step": p // batch_size, "source": name, "pass": passes, "ids": ids,
                     "text": tok.decode(ids)})
    return rows
