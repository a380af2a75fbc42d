"""`biobench study report`: a study's comparisons in the paper's layout, beside the paper's own rows, as Markdown,
LaTeX and CSV (+ JSON of every number), and its analyses' figures, written to <out>/report/.

The numbers are `biobench compare A B --average` on the study's results folder (bench/standings/folder_pairs.compare,
the one A-vs-B computation the CLI, the API and the board share): per task the difference of seed-mean macro-F1
with its 95% paired-bootstrap interval and p-value, and the task average. Added here: each model's mean with a
95% Student-t interval over seeds (bench/stats.seed_summary, as the board shows it), and the task-level p-values
adjusted for testing one question on several tasks (the [[compare]] table's `correction`, Holm by default:
bench/stats.adjust_p_values). The paper reports means over seeds (Tables 1-2); its rows are shown as published.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

from biobench.analysis.plots import plot_differences
from biobench.api.study import Compare, Study
from biobench.ranges import format_ranges
from biobench.runtime.files import atomic_write, csv_text
from biobench.runtime.jsonfile import UnsafeJSONError, read_json
from biobench.standings.folder_pairs import compare
from biobench.standings.scan import load_reference
from biobench.stats import adjust_p_values, seed_summary
from biobench.store import iter_results

CORRECTION_NAMES = {"holm": "Holm (step-down, family-wise error 5%)", "bonferroni": "Bonferroni",
                    "none": "no correction"}


def _paper_row(model: str, lang: str | None) -> Any:
    rows = [r for r in load_reference() if r.model == model and (lang is None or r.lang == lang)]
    return rows[0] if rows else None


def _seed_scores(results: Path, folder: str) -> dict[str, dict[int, float]]:
    """task -> seed -> the task's headline score (`Result.score`, a fraction) of one model's results folder, read
    as `compare` reads it."""
    scores: dict[str, dict[int, float]] = {}
    for _, result in iter_results(results, folder):
        scores.setdefault(result.task_id, {})[result.seed] = result.score
    return scores


def _summary(values: list[float]) -> dict[str, float]:
    # unclipped: "mean ± half the interval" must be the interval (with 2 seeds it can pass 0 or 100: say so)
    s = seed_summary([100 * v for v in values])
    return {"mean": s.mean, "low": s.ci_low, "high": s.ci_high, "seeds": s.n}


def compare_one(study: Study, spec: Compare) -> dict[str, Any]:
    """One [[compare]]: compare's report (the same call as `biobench compare A B --average --json` by hand, A and
    B given as their checkpoint folders), each model's seed summaries, the adjusted p-values, the paper's rows."""
    report = compare(study.results, study.model_path(spec.a), study.model_path(spec.b),
                     list(spec.tasks) if spec.tasks else None, spec.lang, spec.n_boot, True,
                     spec.allow_different_protocols)
    adjusted = adjust_p_values([row["p_value"] for row in report["tasks"]], spec.correction)
    for row, p in zip(report["tasks"], adjusted, strict=True):
        row["p_adjusted"] = p
    models = {}
    for side in ("a", "b"):
        scores = _seed_scores(study.results, report[f"folder_{side}"])
        tasks = [row["task"] for row in report["tasks"]]
        per_task = {t: _summary([scores[t][s] for s in sorted(scores[t])]) for t in tasks if t in scores}
        seeds = set.intersection(*(set(scores[t]) for t in tasks)) if tasks else set()
        # the average's interval: over seeds, of each seed's mean over the tasks (every task run with that seed)
        average = _summary([sum(scores[t][s] for t in tasks) / len(tasks) for s in sorted(seeds)]) if seeds else None
        paper_name = spec.paper_a if side == "a" else spec.paper_b
        paper = _paper_row(paper_name, spec.lang) if paper_name else None
        stated = spec.paper_a_average if side == "a" else spec.paper_b_average
        models[side] = {"name": report[side], "folder": report[f"folder_{side}"], "model": getattr(spec, side),
                        "tasks": per_task, "average": average,
                        "paper": {"model": paper.model, "source": paper.source,
                                  "tasks": {t: paper.scores.get(t) for t in tasks}, "average": paper.paper_avg}
                        if paper is not None else
                        # an average the study file states (Table 7: F1 over 3 tasks), no per-task scores
                        {"model": f"{getattr(spec, side)}, {spec.paper_source or 'the paper'}",
                         "source": spec.paper_source, "tasks": {}, "average": stated}
                        if stated is not None else None}
    return {"name": spec.name, "a": spec.a, "b": spec.b, "correction": spec.correction,
            "correction_name": CORRECTION_NAMES[spec.correction], "n_boot": spec.n_boot, "compare": report,
            "models": models}


def _pct(x: float | None, sign: str = "") -> str:
    return "–" if x is None or x != x else f"{x:{sign}.2f}"


def _cell(summary: dict[str, float] | None) -> str:
    if not summary:
        return "–"
    if summary["seeds"] < 2 or summary["low"] != summary["low"]:
        return f"{summary['mean']:.2f}"
    return f"{summary['mean']:.2f} ± {(summary['high'] - summary['low']) / 2:.2f}"


def score_rows(item: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The paper's layout: one row per model (measured, then the paper's row when named), one column per task
    and the average; a cell is the mean over seeds ± half the 95% interval (%), the paper's as published."""
    tasks = [row["task"] for row in item["compare"]["tasks"]]
    header = ["model", *tasks, "average"]
    rows = []
    for side in ("a", "b"):
        m = item["models"][side]
        rows.append([m["name"], *(_cell(m["tasks"].get(t)) for t in tasks), _cell(m["average"])])
        if m["paper"]:
            p = m["paper"]
            rows.append([f"{p['model']} (paper)", *(_pct(p["tasks"].get(t)) for t in tasks), _pct(p["average"])])
    return header, rows


def difference_rows(item: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """A - B per task and on the average: the difference, its 95% paired-bootstrap interval, p, adjusted p."""
    header = ["task", "A", "B", "A − B", "95% CI", "p", f"p ({item['correction']})", ""]
    rows = []
    for row in item["compare"]["tasks"]:
        tested = row["p_value"] == row["p_value"]
        rows.append([row["task"], _pct(100 * row["mean_a"]), _pct(100 * row["mean_b"]), _pct(100 * row["diff"], "+"),
                     f"[{_pct(100 * row['ci_low'], '+')}, {_pct(100 * row['ci_high'], '+')}]" if tested else "–",
                     f"{row['p_value']:.3f}" if tested else "no test",
                     f"{row['p_adjusted']:.3f}" if tested else "–",
                     "*" if tested and row["p_adjusted"] < 0.05 else ""])
    for lang, avg in item["compare"].get("averages", {}).items():
        rows.append([f"average {lang}", _pct(100 * avg["mean_a"]), _pct(100 * avg["mean_b"]),
                     _pct(100 * avg["diff"], "+"), f"[{_pct(100 * avg['ci_low'], '+')}, {_pct(100 * avg['ci_high'], '+')}]",
                     f"{avg['p_value']:.3f}", "–", "*" if avg["p_value"] < 0.05 else ""])
    return header, rows


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _latex(header: list[str], rows: list[list[str]], caption: str) -> str:
    def esc(text: str) -> str:
        text = "".join(LATEX_SPECIAL.get(ch, ch) for ch in text)
        return text.replace("±", r"$\pm$").replace("−", "$-$").replace("·", r"$\cdot$")

    cols = "l" + "r" * (len(header) - 1)
    lines = [r"\begin{table}[t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{cols}}}", r"\toprule",
             " & ".join(esc(h) for h in header) + r" \\", r"\midrule"]
    lines += [" & ".join(esc(c) for c in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{esc(caption)}}}", r"\end{table}"]
    return "\n".join(lines)


def csv_rows(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (comparison, task or average), every number unrounded (fractions for scores)."""
    out = []
    for item in items:
        a, b = item["models"]["a"], item["models"]["b"]
        for row in item["compare"]["tasks"]:
            sa, sb = a["tasks"].get(row["task"], {}), b["tasks"].get(row["task"], {})
            out.append({"comparison": item["name"], "task": row["task"], "model_a": a["name"], "model_b": b["name"],
                        "mean_a": row["mean_a"], "ci_low_a": sa.get("low", math.nan) / 100,
                        "ci_high_a": sa.get("high", math.nan) / 100, "seeds_a": len(row["seeds_a"]),
                        "mean_b": row["mean_b"], "ci_low_b": sb.get("low", math.nan) / 100,
                        "ci_high_b": sb.get("high", math.nan) / 100, "seeds_b": len(row["seeds_b"]),
                        "diff": row["diff"], "diff_ci_low": row["ci_low"], "diff_ci_high": row["ci_high"],
                        "p_value": row["p_value"], "p_adjusted": row["p_adjusted"], "correction": item["correction"],
                        "paper_a": (a["paper"] or {}).get("tasks", {}).get(row["task"]),
                        "paper_b": (b["paper"] or {}).get("tasks", {}).get(row["task"])})
        for lang, avg in item["compare"].get("averages", {}).items():
            out.append({"comparison": item["name"], "task": f"average {lang}", "model_a": a["name"],
                        "model_b": b["name"], "mean_a": avg["mean_a"], "mean_b": avg["mean_b"], "diff": avg["diff"],
                        "diff_ci_low": avg["ci_low"], "diff_ci_high": avg["ci_high"], "p_value": avg["p_value"],
                        "correction": "none (one test)", "paper_a": (a["paper"] or {}).get("average"),
                        "paper_b": (b["paper"] or {}).get("average")})
    return out


def figures(study: Study, folder: Path) -> list[tuple[str, Path]]:
    """The analyses' figures (CKA by layer, CKA trajectory, needle by length and position) copied beside the
    report: (caption, file) for each analysis that is done."""
    captions = {"cka": "CKA divergence by layer", "cka-trajectory": "CKA divergence along the run (trajectory)",
                "needle": "needle accuracy by length and position"}
    out = []
    for step in study.steps:
        if step.kind != "analysis" or step.done_file is None or not step.done_file.is_file():
            continue
        kind = step.argv[1] if step.argv[1] != "needle" else "needle"
        if kind not in captions or kind == "needle" and step.argv[2] != "run":
            continue
        png = step.done_file.with_suffix(".png")
        if png.is_file():
            target = folder / "figures" / f"{step.id.split('/', 1)[1]}.png"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(png, target)
            out.append((f"{captions[kind]}: {step.id.split('/', 1)[1]}", target))
    return out


def _transplant_text(study: Study, folder: Path) -> str:
    """`layers 0-7 [all] of run:detour/final into run:mlm/final` from a transplant folder's transplant.json."""
    record = _read_json(folder / "transplant.json")
    if not record:
        return ""

    def short(model: str) -> str:  # a study run's checkpoint folder back to its reference
        path = Path(model)
        if path.parent.parent == study.runs:
            return f"run:{path.parent.name}/{path.name}"
        return model

    return (f"layers {format_ranges(record.get('layers', []))} [{record.get('component', 'all')}] of "
            f"{short(str(record.get('from', '?')))} into {short(str(record.get('into', '?')))}")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = read_json(path, 1 << 20)
    except (OSError, UnsafeJSONError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def probe_rows(study: Study) -> list[dict[str, Any]]:
    """Each probe step (Table 3/6's layout: one row per probed model): its model as the study names it (a
    transplant described by what it copied), the task, the mean macro-F1 (%) over the seeds whose result file
    exists, with its 95% Student-t interval, and how many seeds of how many."""
    rows = []
    for step in study.steps:
        if step.analysis != "probe" or step.done_dir is None:
            continue
        argv = list(step.argv)
        model = argv[argv.index("--model") + 1]
        task = argv[argv.index("--task") + 1]
        scores = [r.score for _, r in iter_results(step.done_dir, None, task)] if step.done_dir.is_dir() else []
        path = Path(model)
        transplant = _transplant_text(study, path) if (path / "transplant.json").is_file() else ""
        name = (f"{path.name} ({transplant})" if transplant else
                f"run:{path.parent.name}/{path.name}" if path.parent.parent == study.runs else model)
        rows.append({"probe": step.id.split("/", 1)[1], "model": name, "task": task,
                     "paper": study.paper_scores.get(step.id.split("/", 1)[1]),
                     "summary": _summary(scores) if scores else None, "seeds_done": len(scores),
                     "seeds": len(step.done_patterns), "scores": scores})
    return rows


def difference_figure(item: dict[str, Any], folder: Path) -> Path | None:
    """The comparison's A − B per task and on the average with their 95% CIs (analysis/plots), as
    figures/<name>-differences.png; None when no task was compared."""
    rows = [{"label": r["task"], "diff": r["diff"], "low": r["ci_low"], "high": r["ci_high"],
             "significant": r["p_adjusted"] == r["p_adjusted"] and r["p_adjusted"] < 0.05, "average": False}
            for r in item["compare"]["tasks"]]
    rows += [{"label": f"average {lang}", "diff": a["diff"], "low": a["ci_low"], "high": a["ci_high"],
              "significant": a["p_value"] == a["p_value"] and a["p_value"] < 0.05, "average": True}
             for lang, a in item["compare"].get("averages", {}).items()]
    if not rows:
        return None
    path = folder / "figures" / f"{item['name']}-differences.png"
    plot_differences(rows, f"{item['models']['a']['name']} − {item['models']['b']['name']}"[:90], path)
    return path


def write_report(study: Study) -> dict[str, Any]:
    """Every [[compare]] of the study and its analyses' figures as <out>/report/report.{md,tex,csv,json} and
    report/figures/; returns the numbers (what report.json holds)."""
    import pandas as pd

    folder = study.out / "report"
    folder.mkdir(parents=True, exist_ok=True)
    items = [compare_one(study, spec) for spec in study.compares]
    shown = figures(study, folder)
    md = [f"# {study.path.stem}: report", "",
          f"Study file `{study.path}`; results `{study.results}`. Scores: test macro-F1 (%), mean over seeds ± half "
          "its 95% Student-t interval. Differences: A − B of the seed means, 95% paired-bootstrap interval over "
          "test examples x seeds, two-sided p; task p-values adjusted as named (the average is one test).", ""]
    tex = ["% written by biobench study report", r"% needs \usepackage{booktabs}", ""]
    for item in items:
        h, rows = score_rows(item)
        dh, drows = difference_rows(item)
        title = f"{item['models']['a']['name']} (A) vs {item['models']['b']['name']} (B)"
        md += [f"## {item['name']}: {title}", "", _markdown(h, rows), "", _markdown(dh, drows), "",
               f"*: adjusted p < 0.05 ({item['correction_name']} over {len(item['compare']['tasks'])} tasks; "
               f"{item['n_boot']} bootstrap replicates)."]
        if item["compare"]["warning"]:
            md += ["", f"≠ {item['compare']['warning']}"]
        if (figure := difference_figure(item, folder)) is not None:
            item["figure"] = str(figure)
            md += ["", f"![A − B per task with 95% CIs (filled: significant after {item['correction_name']}): "
                   f"{item['name']}](figures/{figure.name})"]
        md.append("")
        tex += [_latex(h, rows, f"{title}: test macro-F1 (%), mean ± half the 95% CI over seeds"), "",
                _latex(dh, drows, f"{title}: A - B, 95% paired-bootstrap CI, p and {item['correction_name']}"), ""]
    probes = probe_rows(study)
    if probes:
        header = ["probe", "model", "task", "macro-F1", "seeds", "paper"]
        rows = [[p["probe"], p["model"], p["task"], _cell(p["summary"]), f"{p['seeds_done']}/{p['seeds']}",
                 _pct(p["paper"])] for p in probes]
        md += ["## Linear probes", "", "Logistic-regression probe on frozen pooled features (`biobench analyze "
               "probe`, the paper's Table 3/6 layout): test macro-F1 (%), mean over probe seeds ± half its 95% "
               "Student-t interval; a transplant is model B with layers of model A copied in; paper: the score the "
               "study file states for it (`paper = ...`).", "",
               _markdown(header, rows), ""]
        tex += [_latex(header, rows, "Linear probes: test macro-F1 (%), mean ± half the 95% CI over probe seeds"), ""]
    if shown:
        md += ["## Figures", ""] + [f"![{caption}](figures/{path.name})" for caption, path in shown] + [""]
    data = {"study": str(study.path), "results": str(study.results), "comparisons": items, "probes": probes,
            "figures": [str(p) for _, p in shown]}
    atomic_write(folder / "report.md", "\n".join(md))
    atomic_write(folder / "report.tex", "\n".join(tex))
    table = pd.DataFrame(csv_rows(items))
    if len(table):  # seed counts stay integers beside the average rows, which have none
        table = table.astype({"seeds_a": "Int64", "seeds_b": "Int64"})
    atomic_write(folder / "report.csv", csv_text(table))
    if probes:
        atomic_write(folder / "probes.csv", csv_text(pd.DataFrame([
            {"probe": p["probe"], "model": p["model"], "task": p["task"],
             "mean": p["summary"]["mean"] / 100 if p["summary"] else math.nan,
             "ci_low": p["summary"]["low"] / 100 if p["summary"] else math.nan,
             "ci_high": p["summary"]["high"] / 100 if p["summary"] else math.nan,
             "seeds_done": p["seeds_done"], "seeds": p["seeds"],
             "paper": p["paper"] / 100 if p["paper"] is not None else math.nan} for p in probes])))
    atomic_write(folder / "report.json", json.dumps(data, indent=1, default=str, allow_nan=True) + "\n")
    return data
