"""The app's service tabs: Submit (a request form, or the `biobench submit` command filled in), Queue (requests
by status, with times) and "vs paper" (reproduction verdicts).

Why in their own module: they talk to a queue (biobench.service) rather than to the results board, and the app
builds them with one call each. Nothing here imports torch: submitting resolves the model's revision from its
files and the tasks' protocol hashes from the specs.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import gradio as gr
import pandas as pd
from biobench.aliases import ALIASES
from biobench.errors import BiobenchError
from biobench.leaderboard.tables.escape import md, md_code
from biobench.leaderboard.tables.frames import display
from biobench.leaderboard.tables.html import row_anchor
from biobench.leaderboard.tables.rows import model_key
from biobench.names import display_name
from biobench.runtime.paths import HF_DATASETS, hide_paths, public_model
from biobench.service.queue import list_requests
from biobench.service.queue_storage import open_storage
from biobench.service.submission import PublicPolicy, submit_request, vet_public_model
from biobench.standings.entries import Board, Entry
from biobench.standings.reproduction import board_floor, paper_entry, reproduction, verdict_rows
from biobench.store.metadata import LICENSES, MAX_TEXT, metadata_from_fields
from biobench.store.trust import SMOKE_MARK

LANG_TABS = {"fr": "French", "en": "English"}

VERDICT_COLUMNS = ["task", "seeds", "measured", "low", "high", "reported", "difference", "tolerance", "verdict"]
# what a visitor looks for first (model, outcome, score) on the left; the long request id last
QUEUE_COLUMNS = ["status", "model", "score", "board row", "tasks", "seeds", "submitted", "started", "finished", "took",
                 "outcome", "request"]


def queue_writable(queue: str | None) -> tuple[bool, str]:
    """Whether this app may write requests to `queue`, and why not."""
    if not queue:
        return False, "this leaderboard has no request queue"
    if queue.startswith("hf://"):
        from huggingface_hub import get_token

        if os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}:
            return False, "the hub is switched off here (HF_HUB_OFFLINE)"
        return (True, "") if get_token() else (False, "the app has no Hugging Face token (set HF_TOKEN)")
    folder = Path(queue)
    probe = folder if folder.exists() else folder.parent
    if probe.is_dir() and os.access(probe, os.W_OK):
        return True, ""
    return False, f"{queue} is not a folder this app may write"


# the form's metadata fields -> `biobench submit`'s options (bench/commands/submit.py add_metadata_arguments)
METADATA_OPTIONS = {"params": "--params", "context": "--context-length", "license": "--license",
                    "base_model": "--base-model", "training_data": "--training-data", "open_weights": "--open-weights"}


def submit_command(model: str, revision: str, lang: str, tasks: str, seeds: str, queue: str | None,
                   overrides: dict[str, int] | None = None, metadata: dict[str, object] | None = None) -> str:
    """The `biobench submit` command for the form's values (what to run where the app cannot write);
    `metadata`: the stated metadata, already checked (`metadata_from_fields`)."""
    parts = ["biobench", "submit", model or "MODEL"]
    if revision:
        parts += ["--revision", revision]
    parts += ["--tasks", tasks] if tasks else ["--lang", lang or "fr"]
    if seeds:
        parts += ["--seeds", seeds]
    for name, value in (overrides or {}).items():
        parts += [f"--{name.replace('_', '-')}", str(value)]
    for name, stated in (metadata or {}).items():
        text = (",".join(stated) if isinstance(stated, list) else ("yes" if stated else "no") if isinstance(stated, bool)
                else str(stated))
        parts += [METADATA_OPTIONS[name], text]
    parts += ["--queue", queue if queue and queue.startswith(HF_DATASETS) else "QUEUE"]  # never a server path
    return shlex.join(parts)


def _when(stamp: str | None) -> str:
    """'2026-12-04T03:01:02+00:00' -> '2026-12-04 03:01 UTC' (the queue's ISO times, shortened)."""
    if not stamp:
        return ""
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return str(stamp)
    moment = moment.astimezone(UTC) if moment.tzinfo else moment
    return moment.strftime("%Y-%m-%d %H:%M") + (" UTC" if moment.tzinfo else "")


def _took(start: str | None, end: str | None) -> str:
    try:
        seconds = (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _identities(*names: object) -> set[str]:
    """The names one model goes by, lowercased: the given ones, and for an alias or its hub id both of them
    (a request holds what the submitter typed; a result records the hub id the alias resolved to)."""
    found = {str(n).strip().lower() for n in names if isinstance(n, str) and n.strip()}
    for alias in ALIASES:
        pair = {alias.name.lower(), (alias.hub_id or "").lower()} - {""}
        if found & pair:
            found |= pair
    return found


def _same_revision(a: object, b: object) -> bool:
    """Two recorded revisions name the same weights (a hub commit, maybe shortened, or a folder's 'sha256:' weight
    hash); an unrecorded one, or two of different kinds (a commit against a weight hash), cannot tell apart."""
    a, b = str(a or "").lower(), str(b or "").lower()
    if not a or not b or a.startswith("sha256:") != b.startswith("sha256:"):
        return True
    return a.startswith(b) or b.startswith(a)


def request_entry(board: Board | None, request) -> Entry | None:
    """The board entry a request's results went to, found by model identity: the alias, hub id or folder the
    request holds against the entry's recorded id, source, alias and name (`_identities`), the revision when
    both record one, the request's language and tasks. A request with overrides finds its smoke entry (the one
    with the same overrides when the board has several), a protocol request its protocol entry."""
    if board is None:
        return None
    wanted = _identities(request.model, request.name, display_name({"id": request.model}, request.name))
    found = []
    for e in board.entries:
        if e.source != "measured" or (request.lang and e.lang != request.lang):
            continue
        meta = next((runs[0].model_meta for runs in e.runs.values() if runs), {})
        names = _identities(e.model_id, e.base_name or e.name, *(meta.get(k) for k in ("id", "source", "alias", "name")))
        covered = sum(t in e.cells for t in request.tasks)
        if covered and names & wanted and _same_revision(meta.get("revision"), request.revision):
            found.append((bool(e.smoke) == bool(request.overrides), covered, e))
    return max(found, key=lambda f: f[:2])[2] if found else None


@dataclass(frozen=True)
class BoardRow:
    """Where a finished request's row is: its language, the row's id, which table (the language's paper tasks,
    or Other tasks) and whether it is a smoke row (shown once Show smoke runs is ticked)."""

    lang: str
    anchor: str
    part: str
    smoke: bool

    @property
    def label(self) -> str:
        language = LANG_TABS.get(self.lang, self.lang)
        return language if self.part == "paper" else f"Other tasks ({language})"


def board_row(board: Board, entry: Entry, tasks: list[str]) -> BoardRow:

    part = "paper" if any(t in board.benchmark.get(entry.lang, []) for t in tasks if t in entry.cells) else "other"
    return BoardRow(entry.lang, row_anchor(entry.lang, model_key(entry)), part, bool(entry.smoke))


def request_score(entry: Entry | None, tasks: list[str]) -> str:
    """The request's score on the board: its one task's mean, or the mean over its tasks found there with k/n."""
    if entry is None:
        return ""
    have = [entry.cells[t].mean for t in tasks if t in entry.cells]
    if not have:
        return ""
    mean = sum(have) / len(have)
    return f"{mean:.1f}" if len(tasks) == 1 else f"{mean:.1f} (mean of {len(have)}/{len(tasks)} tasks)"


def queue_frame(queue: str | None, board: Board | None = None) -> pd.DataFrame:
    """Requests, running first, then pending, then waiting for review (oldest first), then finished / failed /
    rejected (newest first); a finished request's score and board row come from `board` (its results as the
    board shows them)."""
    if not queue:
        return pd.DataFrame(columns=QUEUE_COLUMNS)

    try:  # a malformed request file or an unreachable hub never stops the app (the worker reports them)
        everything = list_requests(open_storage(queue))  # oldest first
    except BiobenchError:
        return pd.DataFrame(columns=QUEUE_COLUMNS)
    done = sorted((r for r in everything if r.status in ("finished", "failed", "rejected")),
                  key=lambda r: r.finished_at or "", reverse=True)
    requests = ([r for r in everything if r.status == "running"] + [r for r in everything if r.status == "pending"]
                + [r for r in everything if r.status == "pending-review"] + done)
    rows = []
    for r in requests:
        entry = request_entry(board, r) if r.status == "finished" else None
        where = board_row(board, entry, r.tasks) if board is not None and entry is not None else None
        last = hide_paths(r.log_tail[-1]) if r.log_tail else ""
        rows.append({"status": r.status, "request": r.id, "model": public_model(display_name({"id": r.model}, r.name)),
                     "tasks": ", ".join(r.tasks), "seeds": ", ".join(map(str, r.seeds)) if r.seeds else "protocol",
                     "score": request_score(entry, r.tasks), "submitted": _when(r.submitted_at),
                     "started": _when(r.started_at), "finished": _when(r.finished_at),
                     "took": _took(r.started_at, r.finished_at),
                     "outcome": ("results on the board" if entry else "finished; not on the board yet (Refresh)")
                     if r.status == "finished" else last if r.status in ("failed", "rejected") else "",
                     "board row": (f"{where.label}: {entry.base_name or entry.name}"
                                   + (f" {SMOKE_MARK} smoke" if entry.smoke else "")) if entry and where else ""})
    return pd.DataFrame(rows, columns=QUEUE_COLUMNS)


@dataclass
class QueueTab:
    table: gr.Dataframe
    refresh: gr.Button
    frame: Callable[[], pd.DataFrame]
    row_of: Callable[[int], BoardRow | None]  # a row of the table -> where its results are on the board


def build_queue_tab(queue: str | None, get_board: Callable[[], Board]) -> QueueTab:
    """The Queue tab: every request with its status, times and, once finished, its score and board row
    (selecting a finished request's row opens its language table at that row; the app wires the jump)."""
    def frame() -> pd.DataFrame:
        return queue_frame(queue, get_board())

    def row_of(index: int) -> BoardRow | None:
        if not queue:
            return None

        current = frame()
        if not 0 <= index < len(current):
            return None
        request_id = current.iloc[index]["request"]
        request = next((r for r in list_requests(open_storage(queue)) if r.id == request_id), None)
        board = get_board()
        entry = request_entry(board, request) if request is not None else None
        return board_row(board, entry, request.tasks) if entry is not None and request is not None else None

    with gr.Tab("Queue", id="tab-queue"):
        gr.Markdown("Evaluation requests: running, then pending (oldest first), then finished and failed (newest "
                    "first). A finished request's **score** is its mean macro-F1 (%) on the board; select its row "
                    "to open the model's row in the language table." if queue else
                    "This leaderboard has no request queue (start it with `--queue`); requests are made with "
                    "`biobench submit MODEL --queue QUEUE`.", elem_id="lb-queue-note")
        refresh = gr.Button("Refresh the queue", size="sm", elem_id="sb-queue-refresh")
        table = gr.Dataframe(frame(), headers=QUEUE_COLUMNS, interactive=False, elem_id="sb-queue", wrap=True)
    refresh.click(frame, None, table)
    return QueueTab(table, refresh, frame, row_of)


def visitor(request: gr.Request | None) -> str:
    """Who submits through the form: the logged-in hub user, else a short hash of the visitor's address (the
    per-submitter limit counts by it; the address itself is never stored). The address is the connection's,
    or what X-Forwarded-For says only when the connection comes from a proxy the operator trusts
    (`--trusted-proxy`, biobench.service.submission.trust_proxies)."""
    import hashlib

    if request is not None and getattr(request, "username", None):
        return f"hf:{request.username}"[:100]
    host = getattr(getattr(request, "client", None), "host", None) or "unknown"
    return f"visitor-{hashlib.sha256(str(host).encode()).hexdigest()[:10]}"


def form_metadata(fields: dict[str, object] | None) -> dict[str, object]:
    """The form's metadata fields as stated metadata, checked by the grid file's validator
    (biobench.store.metadata); ConfigError in one line otherwise."""
    return metadata_from_fields("the form", **(fields or {}))


def form_submit(queue: str, policy: PublicPolicy, model: str, revision: str, lang: str, tasks: str, seeds: str,
                numbers: dict[str, object], submitter: str, metadata: dict[str, object] | None = None) -> str:
    """One form submission checked as public input (`vet_public_model`, the metadata by `form_metadata`) and
    queued; the answer is one line that names no server path."""
    refused, when = policy.limiter.allow(submitter)  # per visitor, refused forms included; the global cap after
    if refused:
        return f"error: {refused}"
    if not (model or "").strip():
        policy.limiter.refund(when)
        return "error: give a model"
    try:
        overrides = {k: int(v) if isinstance(v, float) and v.is_integer() else v  # checked by submit_request
                     for k, v in numbers.items() if v not in (None, "", 0)}
        stated = form_metadata(metadata)
        model_id, pinned = vet_public_model(model, revision, policy)
        request, note = submit_request(model_id, queue, revision=pinned, tasks=(tasks or "").strip() or None,
                                       lang=None if (tasks or "").strip() else lang, seeds=(seeds or "").strip() or None,
                                       overrides=overrides, submitter=submitter, max_pending=policy.max_pending, max_queued=policy.max_queued,
                                       resolve=False, metadata=stated)
    except BiobenchError as err:
        policy.limiter.refund(when)  # a refused form costs its visitor, not the other visitors' place
        return f"error: {md(hide_paths(str(err).replace(queue, 'the queue')))}"
    return f"submitted {md_code(request.id)}" + (f" ({md(hide_paths(note))})" if note else "")


def build_submit_tab(queue: str | None, table: gr.Dataframe, policy: PublicPolicy | None = None) -> None:
    """The Submit tab (inside the app's gr.Tabs); a submission refreshes the Queue tab's `table`. `policy`:
    what visitors may submit (default: hub ids pinned to a commit only)."""
    policy = policy or PublicPolicy()
    writable, why = queue_writable(queue)
    with gr.Tab("Submit", id="tab-submit"):
        gr.Markdown("Request an evaluation: a worker (`biobench worker`) fine-tunes the model on the chosen tasks "
                    "with the paper's protocol and publishes the results here. "
                    + ("" if writable else f"This app cannot write requests ({why}): the form fills in the "
                       "`biobench submit` command to run where the queue is reachable."))
        with gr.Row():
            model = gr.Textbox(label="Model (hub id ORG/NAME" + (", or a folder the operator allows" if policy.local_roots
                                                              else "") + ")", elem_id="sb-model")
            revision = gr.Textbox(label="Revision (hub commit, 40 hex digits; empty: resolved from the hub)",
                                  elem_id="sb-revision")
        with gr.Row():
            lang = gr.Dropdown(["fr", "en"], value="fr", label="Language (every paper task)", elem_id="sb-lang")
            tasks = gr.Textbox(label="or tasks (comma-separated ids)", elem_id="sb-tasks")
            seeds = gr.Textbox(label="Seeds (e.g. 42-50; empty: the protocol's)", elem_id="sb-seeds")
        with gr.Accordion("Smoke-run overrides (recorded in the request and every result; such results do not "
                          "follow the paper's protocol)", open=False):
            with gr.Row():
                epochs = gr.Number(label="Epochs", precision=0, elem_id="sb-epochs")
                max_length = gr.Number(label="Max length", precision=0, elem_id="sb-max-length")
                limit_train = gr.Number(label="Train examples (limit)", precision=0, elem_id="sb-limit-train")
        with gr.Accordion("Model metadata (optional: what a reader judges the model by; shown on the board as "
                          "stated by the submitter, over what the model card says)", open=False):
            with gr.Row():
                params = gr.Textbox(label="Parameters (e.g. 110M, 1.5B)", max_length=40, elem_id="sb-params")
                context = gr.Textbox(label="Context length (tokens)", max_length=40, elem_id="sb-context")
                license_id = gr.Dropdown(["", *sorted(LICENSES)], value="", label="License", elem_id="sb-license")
            with gr.Row():
                base_model = gr.Textbox(label="Base model", max_length=MAX_TEXT, elem_id="sb-base-model")
                training_data = gr.Textbox(label="Training data (corpus names, comma-separated)", elem_id="sb-training-data")
                open_weights = gr.Dropdown(["", "yes", "no"], value="", label="Open weights", elem_id="sb-open-weights")
        button = gr.Button("Submit" if writable else "Show the command", elem_id="sb-submit")
        message = gr.Markdown(elem_id="sb-message")

        def on_submit(model_v, revision_v, lang_v, tasks_v, seeds_v, epochs_v, max_length_v, limit_train_v,
                      params_v, context_v, license_v, base_model_v, training_data_v, open_weights_v,
                      request: gr.Request | None = None):
            numbers = {"epochs": epochs_v, "max_length": max_length_v, "limit_train": limit_train_v}
            fields = {"params": params_v, "context": context_v, "license": license_v, "base_model": base_model_v,
                      "training_data": training_data_v, "open_weights": open_weights_v}
            if not writable:
                safe = {k: v for k, v in numbers.items() if isinstance(v, int | float) and v == v and abs(v) < 1e9 and v}
                try:
                    stated = form_metadata(fields)
                except BiobenchError as err:
                    return f"error: {md(hide_paths(str(err)))}", queue_frame(queue)
                return (f"Run: {md_code(submit_command(model_v, revision_v, lang_v, tasks_v, seeds_v, queue, {k: int(v) for k, v in safe.items()}, stated))}",
                        queue_frame(queue))
            assert queue is not None  # writable: queue_writable refuses no queue
            return (form_submit(queue, policy, model_v, revision_v, lang_v, tasks_v, seeds_v, numbers, visitor(request),
                                fields), queue_frame(queue))

        button.click(on_submit, [model, revision, lang, tasks, seeds, epochs, max_length, limit_train, params, context,
                                 license_id, base_model, training_data, open_weights], [message, table])


@dataclass
class PaperTab:
    model: gr.Dropdown
    table: gr.Dataframe
    note: gr.Markdown
    choices: Callable[[], list[tuple[str, str]]]
    show: Callable


def build_paper_tab(get_board: Callable[[], Board]) -> PaperTab:
    """The "vs paper" tab: pick a measured model that the paper reports; per task and for the average, the
    verdict of bench/standings/reproduction.py. `get_board` returns the current board (it changes on refresh)."""
    def choices() -> list[tuple[str, str]]:
        board = get_board()
        return [(f"{e.name} ({e.lang})", f"{e.lang}|{e.key}") for e in board.entries
                if e.source == "measured" and paper_entry(board, e) is not None]

    def show(value: str | None):
        if not value:
            return pd.DataFrame(columns=VERDICT_COLUMNS), ("No measured model here is one the paper reports (Tables 1-2): evaluate one of "
                                    "them, e.g. `biobench eval --model ModernCamemBERT --lang fr`.")
        lang, key = value.split("|", 1)
        board = get_board()
        entry = next((e for e in board.entries if e.key == key and e.lang == lang and e.source == "measured"), None)
        if entry is None:
            return pd.DataFrame(columns=VERDICT_COLUMNS), f"{md(key)} has no {md(lang)} results any more"
        frame = display(pd.DataFrame(verdict_rows(reproduction(board, entry, board_floor(board, entry))),
                                     columns=VERDICT_COLUMNS),
                        {"measured": "score", "low": "score", "high": "score", "reported": "score",
                         "difference": "difference", "seeds": "count"})
        return frame, ("**reproduced**: the paper's value lies in the measured interval (95% CI over seeds; one seed: "
                       "the MDD floor from the test set); the average needs every paper task (docs/PROTOCOL.md).")

    with gr.Tab("vs paper", id="tab-paper"):
        first = choices()
        # no measured model the paper reports: no empty dropdown, the note says what to evaluate (a refresh that
        # brings one shows the dropdown: see `update`)
        model = gr.Dropdown(first, value=first[0][1] if first else None, label="Model", elem_id="vp-model",
                            visible=bool(first))
        opening = show(first[0][1] if first else None)
        note = gr.Markdown(opening[1], elem_id="vp-note")
        table = gr.Dataframe(opening[0], interactive=False, elem_id="vp-table", headers=VERDICT_COLUMNS,
                             visible=bool(first))
    def shown(value: str | None):
        frame, text = show(value)
        return gr.update(value=frame, visible=bool(value)), text

    model.change(shown, model, [table, note])
    return PaperTab(model, table, note, choices, shown)
