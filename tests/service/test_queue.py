"""Evaluation requests and workers: one request per computation, exclusive claims under a race, leases that
expire and are taken over, the hub backend's recorded operations and its retry on a concurrent commit, and a
real `biobench submit` -> `biobench worker --once` round trip on a tiny model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from biobench.cli import main
from biobench.errors import ConfigError, ResultsError
from biobench.service import queue
from biobench.service.queue_storage import FolderStorage, HubStorage, open_storage
from biobench.service.worker import WorkerConfig, publish, run_worker

TASKS = {"demo-cls": "p1", "demo-ml": "p2"}


def submit(storage, model="org/enc", revision="abc", seeds=(1, 2), clock=1000.0, **kw):
    return queue.submit(storage, model=model, revision=revision, lang=None, tasks=list(TASKS), seeds=list(seeds),
                        overrides={"epochs": 1}, task_protocols=TASKS, submitter="ada", clock=clock, **kw)


def test_submit_writes_a_pending_request_and_refuses_the_same_computation(tmp_path):
    storage = FolderStorage(tmp_path)
    first = submit(storage)
    stored = json.loads((tmp_path / "requests" / f"{first.id}.json").read_text())
    assert stored["status"] == "pending" and stored["submitter"] == "ada" and stored["seeds"] == [1, 2]
    assert stored["protocol_hash"] == queue.protocol_hash(TASKS, [1, 2]) and stored["submitted_at"] == "1970-01-01T00:16:40Z"
    with pytest.raises(ConfigError, match=rf"^org/enc @ abc with this protocol is already pending as request "
                                          rf"{first.id} in {tmp_path}; nothing submitted$"):
        submit(storage, clock=2000.0)
    other = submit(storage, seeds=(3,), clock=2000.0)  # another protocol (seeds): a new request
    newer = submit(storage, revision="def", clock=3000.0)  # another revision: a new request
    assert len({first.key, other.key, newer.key}) == 3
    first.status = "failed"
    (tmp_path / "requests" / f"{first.id}.json").write_bytes(first.to_json())
    assert submit(storage, clock=4000.0).key == first.key  # a failed request may be asked for again


def test_claims_take_the_oldest_and_are_exclusive_under_a_race(tmp_path):
    storage = FolderStorage(tmp_path)
    ids = [submit(storage, revision=f"r{i}", clock=1000.0 + i).id for i in range(12)]
    assert queue.claim_next(FolderStorage(tmp_path / "other"), "w", 60) is None
    claimed: list[tuple[str, str]] = []
    start = threading.Barrier(4)

    def worker(name):
        start.wait()
        while (lease := queue.claim_next(storage, name, 60)) is not None:
            claimed.append((lease.request.id, name))

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(i for i, _ in claimed) == sorted(ids)  # each request claimed exactly once
    assert all(r.status == "running" and r.attempts == 1 for r in queue.list_requests(storage))


def test_an_expired_lease_is_taken_over_and_the_first_worker_stops(tmp_path):
    storage = FolderStorage(tmp_path)
    request = submit(storage)
    a = queue.claim_next(storage, "A", 10, clock=0.0)
    assert a.generation == 1 and a.request.id == request.id
    assert queue.claim_next(storage, "B", 10, clock=5.0) is None  # still held
    assert queue.renew(storage, a, 10, clock=8.0)  # renewed until 18
    assert queue.claim_next(storage, "B", 10, clock=15.0) is None
    b = queue.claim_next(storage, "B", 10, clock=19.0)  # A died: its lease expired at 18
    assert b.generation == 2 and b.request.attempts == 2 and b.request.started_at == a.request.started_at
    assert not queue.renew(storage, a, 10, clock=20.0)  # A finds it lost the request
    queue.finish(storage, a, "failed", ["late"])  # ... and cannot overwrite B's outcome
    assert queue.list_requests(storage)[0].status == "running"
    queue.finish(storage, b, "finished", ["ok"], results="res/")
    final = queue.list_requests(storage)[0]
    assert (final.status, final.worker, final.log_tail, final.results) == ("finished", "B", ["ok"], "res/")
    assert queue.claim_next(storage, "C", 10, clock=100.0) is None  # finished: never claimed again


def test_an_unreadable_request_is_one_problem_naming_it(tmp_path):
    (tmp_path / "requests").mkdir()
    (tmp_path / "requests" / "x.json").write_text("{not json")
    requests, problems = queue.scan_requests(FolderStorage(tmp_path))
    assert requests == [] and len(problems) == 1 and problems[0].path == "requests/x.json"
    assert problems[0].reason.startswith("not a biobench request (not valid JSON") and problems[0].stem == "x"
    good = json.loads(submit(FolderStorage(tmp_path / "ok")).to_json())
    (tmp_path / "requests" / "x.json").write_text(json.dumps({**good, "id": "x", "status": "paused"}))
    assert "unknown status 'paused'" in queue.scan_requests(FolderStorage(tmp_path))[1][0].reason


def test_paths_from_data_cannot_leave_the_queue(tmp_path):
    storage = FolderStorage(tmp_path / "q")
    for bad in ("../x.json", "/etc/passwd", "requests/../../x", ""):
        with pytest.raises(ConfigError, match="bad queue path"):
            storage.write(bad, b"x")
    assert not (tmp_path / "x.json").exists()


def test_the_hub_backend_dry_run_records_the_commits_it_would_make(tmp_path):
    storage = open_storage("hf://datasets/org/requests", dry_run=tmp_path)
    request = submit(storage)
    assert queue.claim_next(storage, "w", 60, clock=0.0).generation == 1
    ops = [json.loads(line) for line in (tmp_path / "operations.jsonl").read_text().splitlines()]
    assert [(o["operation"], o["path_in_repo"]) for o in ops] == [
        ("add", f"requests/{request.id}.json"), ("add", f"leases/{request.id}/000001.json"),
        ("add", f"requests/{request.id}.json")]
    assert {(o["call"], o["repo_id"], o["repo_type"]) for o in ops} == {("HfApi.create_commit", "org/requests", "dataset")}
    assert ops[0]["parent_commit"] == "HEAD" and ops[1]["parent_commit"] == "HEAD"  # creations are conditional
    with pytest.raises(ConfigError, match="--dry-run is for a hub queue"):
        open_storage(str(tmp_path), dry_run=tmp_path)


class FakeHub:
    """An in-memory dataset repo with HfApi's method names; `race` commits a stranger's change just before
    our next commit, so the hub refuses it (412), as it does when parent_commit is no longer the head."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.sha = 0
        self.race = 0
        self.commits: list[tuple[str | None, list[str]]] = []

    def repo_info(self, repo_id, repo_type):
        return type("Info", (), {"sha": str(self.sha)})()

    def list_repo_files(self, repo_id, repo_type, revision=None):
        return sorted(self.files)

    def hf_hub_download(self, repo_id, filename, repo_type):
        from huggingface_hub.errors import EntryNotFoundError

        if filename not in self.files:
            raise EntryNotFoundError(filename)
        path = Path(os.environ["FAKE_HUB_DIR"]) / filename.replace("/", "__")
        path.write_bytes(self.files[filename])
        return str(path)

    def create_commit(self, repo_id, repo_type, commit_message, parent_commit, operations):
        import httpx
        from huggingface_hub.errors import HfHubHTTPError

        if self.race:
            self.race -= 1
            self.sha += 1  # someone else committed
        if parent_commit is not None and parent_commit != str(self.sha):
            raise HfHubHTTPError("precondition failed", response=httpx.Response(
                412, request=httpx.Request("POST", "https://huggingface.co/api/datasets/x/commit/main")))
        for op in operations:
            self.files[op.path_in_repo] = op.path_or_fileobj
        self.sha += 1
        self.commits.append((parent_commit, [op.path_in_repo for op in operations]))


def test_the_hub_backend_claims_with_a_conditional_commit_and_retries_after_a_race(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_HUB_DIR", str(tmp_path))
    hub = FakeHub()
    storage = HubStorage("org/requests", api=hub)
    request = submit(storage)
    hub.race = 1
    lease = queue.claim_next(storage, "w", 60, clock=0.0)
    assert lease.generation == 1
    parents = [p for p, paths in hub.commits if paths == [f"leases/{request.id}/000001.json"]]
    assert len(parents) == 1 and parents[0] is not None  # committed on the head it checked, after one refusal
    assert not storage.create(f"leases/{request.id}/000001.json", b"{}")  # exists: refused without a commit
    assert queue.list_requests(storage)[0].status == "running"
    hub.race = 99
    with pytest.raises(ResultsError, match="could not create x after 5 tries"):
        storage.create("x", b"1")


def stub_command(record: Path):
    """A stand-in for eval that records which request it ran (the race test is about claiming, not training)."""
    def command(request, results):
        return [sys.executable, "-c", f"open({str(record)!r}, 'a').write({request.id!r} + '\\n')"]
    return command


def test_two_workers_on_one_folder_run_each_request_once(tmp_path):
    storage = FolderStorage(tmp_path / "q")
    ids = [submit(storage, revision=f"r{i}", clock=1000.0 + i).id for i in range(6)]
    record = tmp_path / "ran.txt"
    config = WorkerConfig(results=str(tmp_path / "results"), poll_s=0.1, renew_s=0.5, lease_s=30,
                          log_dir=tmp_path / "logs")
    counts = []

    def work(name):
        """Claim and run one request at a time until none is pending: no wall-clock deadline, so a loaded
        machine (each stand-in eval starts a Python, >= 0.5 s there) slows the test instead of failing it."""
        once = WorkerConfig(**{**config.__dict__, "worker_id": name, "once": True})
        ran = 0
        while run_worker(storage, once, log=lambda _: None, command=stub_command(record)):
            ran += 1
        counts.append(ran)

    threads = [threading.Thread(target=work, args=(f"w{i}",), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads)
    assert sorted(record.read_text().split()) == sorted(ids) and sum(counts) == 6
    assert {r.status for r in queue.list_requests(storage)} == {"finished"}


def test_a_failing_eval_marks_the_request_failed_with_its_last_lines(tmp_path):
    storage = FolderStorage(tmp_path / "q")
    submit(storage)
    config = WorkerConfig(results=str(tmp_path / "r"), once=True, log_dir=tmp_path / "logs")
    failing = lambda request, results: [sys.executable, "-c", "print('loading'); raise SystemExit('error: no data for demo-ml')"]  # noqa: E731
    assert run_worker(storage, config, log=lambda _: None, command=failing) == 1
    request = queue.list_requests(storage)[0]
    assert request.status == "failed" and request.log_tail == ["loading", "error: no data for demo-ml"]


def test_worker_options_are_checked():
    assert main(["worker", "--queue", "q", "--results", "r", "--lease-seconds", "10", "--renew-seconds", "10"]) == 2


@pytest.mark.slow
def test_submit_then_worker_once_evaluates_and_publishes(submitted_and_evaluated, tmp_path):
    """conftest's submitted_and_evaluated: submit, the same again while pending, worker --once, worker --once."""
    q, results, steps = submitted_and_evaluated.queue, submitted_and_evaluated.results, submitted_and_evaluated.steps
    assert steps.submit[0] == 0
    assert steps.again[0] == 2 and "already pending as request" in steps.again[2]
    assert steps.worker[0] == 0
    out = steps.worker[1]
    assert "demo-cls: macro_f1 " in out and "⚑ smoke run (epochs 1 (protocol " in out  # the score, not only where
    request = queue.list_requests(FolderStorage(q))[0]
    assert request.status == "finished" and request.results == str(results)
    result = json.loads(next(results.glob("*/demo-cls/seed-1.smoke-*.json")).read_text())  # --epochs 1: smoke
    assert result["model"]["revision"] == request.revision and result["protocol"]["epochs"] == 1
    assert steps.idle[0] == 0 and "no pending request" in steps.idle[1]
    # the same results published to a hub dataset (dry run): the parquet the leaderboard reads back
    dry = tmp_path / "dry"
    where = publish(WorkerConfig(results="hf://datasets/org/results", results_dry_run=dry), results)
    import pandas as pd

    frame = pd.read_parquet(dry / "results.parquet")
    assert where.startswith("hf://datasets/org/results (dry run") and list(frame["task"]) == ["demo-cls"]


@pytest.mark.slow
def test_a_killed_worker_is_resumed_and_each_result_exists_once(tiny_mlm_dir, tmp_path):
    env = {**os.environ, "BIOBENCH_CACHE": str(tmp_path / "cache")}
    q, results = tmp_path / "queue", tmp_path / "results"
    biobench = [sys.executable, "-m", "biobench.cli"]
    subprocess.run([*biobench, "submit", str(tiny_mlm_dir), "--tasks", "demo-cls", "--seeds", "1-3", "--epochs", "2",
                    "--max-length", "32", "--limit-train", "200", "--queue", str(q)], check=True, env=env)
    worker = [*biobench, "worker", "--queue", str(q), "--results", str(results), "--once",
              "--lease-seconds", "3", "--renew-seconds", "1"]
    first = subprocess.Popen(worker, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600  # a loaded 2-core machine trains slowly
    while not list(results.glob("*/demo-cls/seed-1.smoke-*.json")) and time.time() < deadline:  # --epochs 2: smoke
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait()
    finished = {p.name: p.read_bytes() for p in results.glob("*/demo-cls/seed-*.json")}
    assert any(n.startswith("seed-1.smoke-") for n in finished) and len(finished) < 3
    time.sleep(4)  # the lease expires; the eval child died with its worker, so nothing more is written
    assert {p.name: p.read_bytes() for p in results.glob("*/demo-cls/seed-*.json")} == finished
    second = subprocess.run(worker, env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    after = {p.name: p.read_bytes() for p in results.glob("*/demo-cls/seed-*.json")}
    assert sorted(n.split(".")[0] for n in after) == ["seed-1", "seed-2", "seed-3"]
    assert all(".smoke-" in n for n in after)
    assert all(after[name] == data for name, data in finished.items())  # finished results untouched, not redone
    request = queue.list_requests(FolderStorage(q))[0]
    assert (request.status, request.attempts) == ("finished", 2)
    log = next((tmp_path / "cache" / "worker" / "logs").glob(f"{request.id}.2.log")).read_text()
    assert f"{len(finished)} already done" in log


def test_worker_once_prints_each_finished_tasks_score_with_its_smoke_and_degenerate_marks(tmp_path):
    """`worker --once` says what a request scored, not only where: per task the test score in percent over its
    seeds, ⚑ with the overrides of a smoke request, and a ⚠ line ending with the command that fixes it — the
    store's trust code, as eval's summary and the board show them. A protocol run of the same seed (another
    request's) is not this request's score."""
    from biobench import store

    storage = FolderStorage(tmp_path / "q")
    request = submit(storage, revision="sha256:" + "ab" * 32, seeds=(1,))
    results = tmp_path / "results"
    model = {"id": "org/enc", "alias": "enc", "slug": "org__enc", "revision": request.revision}
    note = {"finding": "the same class (neg) for every one of the 9 test examples", "reason": "too few steps"}
    for task, f1, smoke, details in (("demo-cls", 0.4207, True, {}), ("demo-ml", 0.0, True, {"degenerate": note}),
                                     ("demo-cls", 0.9, False, {})):
        key = store.run_key(request.revision, "sha256:d", "p", 1)
        found = {"overrides": {"epochs": {"run": 1, "protocol": 15}}} if smoke else {}
        result = store.Result(model, {"id": task, "lang": "en", "kind": "classification"}, 1, {"hash": "p"}, key,
                              {"test": {"macro_f1": f1}}, {**found, **details})
        store.write_result(store.result_path(results, "org__enc--abababab", task, 1, "ab" * 8 if smoke else None),
                           result, [])
    lines: list[str] = []
    config = WorkerConfig(results=str(results), once=True, log_dir=tmp_path / "logs")
    assert run_worker(storage, config, log=lines.append, command=lambda r, d: [sys.executable, "-c", "pass"]) == 1
    said = [line.removeprefix(f"{request.id}: ") for line in lines if line.startswith(f"{request.id}: ")]
    assert said[1:] == [
        "finished; results in " + str(results),
        "demo-cls: macro_f1 42.07 (seed 1) ⚑ smoke run (epochs 1 (protocol 15)): not the protocol's score",
        "demo-ml: macro_f1 0.00 (seed 1) ⚑ smoke run (epochs 1 (protocol 15)): not the protocol's score",
        "⚠ demo-ml seed 1: degenerate: the same class (neg) for every one of the 9 test examples (likely: too few "
        "steps); run: biobench eval --model enc --tasks demo-ml --seeds 1 --quick"]


def test_submit_says_a_smoke_request_is_one_and_what_to_run_next(tmp_path):
    from biobench.commands.submit import next_steps

    storage = FolderStorage(tmp_path / "q")
    smoke = submit(storage)  # overrides epochs 1
    lines = next_steps(smoke, str(tmp_path / "q"))
    assert lines[0].startswith("⚑ smoke run: protocol overrides epochs 1; its score is a check, not the protocol's")
    assert lines[1] == (f"next: biobench worker --queue {tmp_path / 'q'} --results results/ --once   (runs it here, "
                        "then prints its scores; a worker already serving the queue takes it by itself)")
    assert lines[2].startswith(f"watch: biobench queue list --queue {tmp_path / 'q'}")
    protocol = queue.submit(storage, model="org/enc", revision="def", lang=None, tasks=list(TASKS), seeds=None,
                            overrides={}, task_protocols=TASKS, submitter="ada", clock=2000.0)
    assert [line.split(":")[0] for line in next_steps(protocol, "q")] == ["next", "watch"]  # no ⚑ line
