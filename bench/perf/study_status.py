"""`biobench study status` with and without its plan cache (<out>/.study/plans/), side by side.

    python -m biobench.perf.study_status examples/studies/tiny.toml --out DIR --repeats 5

Each call is a fresh `python -m biobench.cli study status` process (what a user types), arms alternated (plan,
cached, cached, plan, ...): "plan" removes the cache before the call, so every eval step is planned (model
revision from its weights, task data loaded, keys computed); "cached" keeps it, so the steps' result files and
claims are read against the kept plan. Both must print the same states (checked). Prints each arm's median
wall time and, last, `ratio: X.XX` (plan / cached). The study's steps should be done (or partly) for a
figure that means something: run the study first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from biobench.api.study_run import legacy_study
from biobench.runtime.ownership import remove_inside


def status_once(study: Path, out: Path, keep_cache: bool) -> tuple[float, str]:
    if not keep_cache:
        remove_inside(out / ".study" / "plans", out, legacy=legacy_study)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "biobench.cli", "study", "status", str(study), "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"study status failed: {done.stderr.strip()[-500:]}")
    return took, done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("study", type=Path, help="the study file")
    parser.add_argument("--out", type=Path, required=True, help="its study folder (run before)")
    parser.add_argument("--repeats", type=int, default=5, help="calls per arm (default 5)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats takes a positive number")
    times: dict[str, list[float]] = {"plan": [], "cached": []}
    outputs: dict[str, set[str]] = {"plan": set(), "cached": set()}
    status_once(args.study, args.out, keep_cache=False)  # warms the OS file cache; every call leaves the plan cache
    for i in range(args.repeats):
        for arm in (("plan", "cached") if i % 2 == 0 else ("cached", "plan")):
            took, printed = status_once(args.study, args.out, keep_cache=arm == "cached")
            times[arm].append(took)
            outputs[arm].add(printed)
    if len(outputs["plan"] | outputs["cached"]) != 1:
        raise SystemExit("the two arms printed different states:\n" + "\n---\n".join(outputs["plan"] | outputs["cached"]))
    load = os.getloadavg()
    for arm, values in times.items():
        print(f"{arm:<7} median {statistics.median(values):.2f} s  ({', '.join(f'{v:.2f}' for v in values)})")
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; states identical in both arms")
    print(f"ratio: {statistics.median(times['plan']) / statistics.median(times['cached']):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
