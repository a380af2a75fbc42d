"""Each fine-tuning setting is stated once, as a field of biobench.protocols.Protocol made by `setting()` (issue 47
part 3): its flag, its grid and request key, its range check, its `--quick` value and its protocol-table row are
all read from that field. The test adds one field to a copy of the module and checks every place it reaches."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import MISSING, fields
from pathlib import Path

from biobench import protocols
from biobench.protocols import OVERRIDE_RANGES, OVERRIDES, PROTOCOLS, QUICK, SETTINGS, Protocol, stated
from biobench.tasks.registry import list_specs

ROOT = Path(__file__).resolve().parents[1]
ANCHOR = "    # fr: bert_text_cls / bert_multilabel_cls / span NER; en: the model's own HF heads."
NEW_FIELD = '''    label_smoothing: float | None = setting(None, help="label smoothing of the training loss", parse=float,
                                            bounds=Bounds(0, 1, below=True), quick={"*": 0.0}, late=True,
                                            defaults={("fr", "ner"): 0.1}, source={"*": "a test's setting"})
'''

PROBE = r'''
import argparse, contextlib, io, json, sys
from pathlib import Path
import importlib.util

path, new_field, anchor, tmp = sys.argv[1:5]
source = Path(path).read_text()
assert source.count(anchor) == 1
spec = importlib.util.spec_from_loader("biobench.protocols", loader=None)
module = importlib.util.module_from_spec(spec)
module.__file__ = path
sys.modules["biobench.protocols"] = module  # before anything imports the real one
exec(compile(source.replace(anchor, new_field + anchor), path, "exec"), module.__dict__)
import biobench
biobench.protocols = module

from biobench import cli
from biobench.errors import ConfigError
from biobench.eval.grid import read_grid_file
from biobench.service import queue, worker
from biobench.tasks.registry import list_specs

out = {}
help_text = io.StringIO()
with contextlib.redirect_stdout(help_text), contextlib.suppress(SystemExit):
    cli.main(["eval", "--help"])
out["eval_help"] = "--label-smoothing" in help_text.getvalue()
parser = argparse.ArgumentParser()
module.add_protocol_arguments(parser)
out["from_args"] = module.overrides_from_args(parser.parse_args(["--label-smoothing", "0.2", "--lr", "1e-4"]))

grid = Path(tmp) / "grid.toml"
grid.write_text('[[grid]]\nname = "g"\nmodels = ["someorg/some-model"]\ntasks = ["gad"]\n'
                'overrides = { label-smoothing = 0.25 }\n')
out["grid"] = read_grid_file(grid)[0].overrides
grid.write_text('[[grid]]\nname = "g"\nmodels = ["someorg/some-model"]\ntasks = ["gad"]\noverrides = { label_smoothing = 1 }\n')
try:
    read_grid_file(grid)
    out["grid_refusal"] = None
except ConfigError as err:
    out["grid_refusal"] = str(err)

request = dict(id="r1", model="someorg/some-model", revision="abc", precision="float32", lang="en", tasks=["gad"],
               seeds=None, overrides={"label_smoothing": "0.3"}, protocol_hash="h", key="k", submitter="me",
               submitted_at="2026-12-06T00:00:00Z")
fields = queue.check_fields(request)
out["request"] = fields["overrides"]
config = worker.WorkerConfig(results=str(tmp), log_dir=Path(tmp))
out["worker_args"] = [a for a in worker.eval_arguments(queue.Request(**fields), Path(tmp), config) if "smoothing" in a]
try:
    queue.check_fields({**request, "overrides": {"label_smoothing": 2}})
    out["request_refusal"] = None
except ValueError as err:
    out["request_refusal"] = str(err)
try:
    module.check_override("label_smoothing", "1")
except ConfigError as err:
    out["range"] = str(err)

out["quick"] = module.quick_overrides("en", "classification")
specs = {s.id: s for s in list_specs(None)}
rows = {t: module.protocol_row(specs[t]) for t in ("gad", "quaero-emea")}
out["rows"] = {t: r["settings"].get("label_smoothing") for t, r in rows.items()}
out["table_header"] = module.protocol_markdown(list(rows.values())).splitlines()[0]
out["hashes"] = {t: module.resolve_task_protocol(specs[t]).hash for t in ("gad", "quaero-emea")}
out["smoothing"] = {t: module.resolve_task_protocol(specs[t]).label_smoothing for t in ("gad", "quaero-emea")}
print(json.dumps(out))
'''


def test_one_new_field_reaches_the_flag_grid_request_range_quick_and_table(tmp_path):
    specs = {s.id: s for s in list_specs(None)}
    before = {t: protocols.resolve_task_protocol(specs[t]).hash for t in ("gad", "quaero-emea")}
    done = subprocess.run([sys.executable, "-c", PROBE, str(ROOT / "bench/protocols.py"), NEW_FIELD, ANCHOR,
                           str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["eval_help"] is True  # the flag of `biobench eval`
    assert out["from_args"] == {"label_smoothing": 0.2, "lr": 1e-4}
    assert out["grid"] == {"label_smoothing": 0.25}  # a grid file's key, dash or underscore
    assert "override label_smoothing" in out["grid_refusal"] and "--label-smoothing" in out["grid_refusal"]
    assert out["request"] == {"label_smoothing": 0.3}  # a queued request's field, parsed by the setting
    assert out["worker_args"] == ["--label-smoothing=0.3"]  # ... and the command line the worker runs
    assert "--label-smoothing" in out["request_refusal"]
    assert out["range"] == "bad --label-smoothing value '1.0': must be from 0 to below 1"  # its bounds
    assert out["quick"]["label_smoothing"] == 0.0 and out["quick"]["max_steps"] == 150
    assert out["rows"]["gad"] == {"value": None, "source": "a test's setting"}
    assert out["rows"]["quaero-emea"] == {"value": 0.1, "source": "a test's setting"}  # fr NER's stated default
    assert "| label smoothing | seeds |" in out["table_header"]
    assert out["smoothing"] == {"gad": None, "quaero-emea": 0.1}
    # a late setting left unset keeps every published hash; a protocol that sets it gets a new one
    assert out["hashes"]["gad"] == before["gad"] and out["hashes"]["quaero-emea"] != before["quaero-emea"]


def test_the_views_are_made_from_the_settings():
    assert list(OVERRIDES) == [s.flag for s in SETTINGS.values() if s.flag]
    assert all(OVERRIDES[s.flag][0] == s.name and OVERRIDES[s.flag][1] is s.parse for s in SETTINGS.values() if s.flag)
    assert OVERRIDE_RANGES == {s.name: s.bounds for s in SETTINGS.values() if s.flag and s.bounds}
    assert {"grad_clip", "dev_metric"} <= set(SETTINGS) and not SETTINGS["grad_clip"].flag  # stated, not overridable
    assert QUICK[("fr", "ner")]["head"] == "hf-token" and "head" not in QUICK[("en", "ner")]
    assert PROTOCOLS[("fr", "ner")]["max_steps"] == 4000 and PROTOCOLS[("fr", "ner")]["eval_every"] == 500
    assert PROTOCOLS[("en", "ner")]["epochs"] == 20 and "eval_every" not in PROTOCOLS[("en", "ner")]


def test_every_protocol_states_every_setting_without_a_default():
    """A Protocol field with no default (epochs, lr, batch_size, ...) must be stated for every protocol and task
    kind, else resolving a task of that kind fails; max_length alone comes from the task spec."""
    required = [f.name for f in fields(Protocol) if f.default is MISSING and f.default_factory is MISSING]
    for (protocol, kind), values in PROTOCOLS.items():
        assert set(required) - set(values) == {"name", "max_length"}, (protocol, kind)
    for s in SETTINGS.values():  # every row a setting names is one the table shows
        assert s.row is None or s.row in dict(protocols.PROTOCOL_FIELDS), s.name


def test_stated_takes_the_most_specific_key():
    values = {"*": 1, "fr": 2, ("fr", "ner"): 3}
    assert [stated(values, "fr", "ner"), stated(values, "fr", "relation"), stated(values, "en", "ner")] == [3, 2, 1]
    assert stated({}, "fr", "ner") is MISSING
