"""Before/after figures of issue 58 (hostile input, round five) for docs/RELIABILITY.md: each command line of the
table `tests/hostile_corpus.round5_cli_cases` as a real `biobench` process under an address-space cap
(resource.RLIMIT_AS in the child), with its rc, output lines, traceback, wall time and the child's own peak RSS
(the runner of scripts/hostile_round4.py, `hostile_corpus.run_limited`).

    .venv/bin/python scripts/hostile_round5.py --label after
    /path/to/main/.venv/bin/python scripts/hostile_round5.py --label before   # an interpreter whose biobench is main

The cases are generated (nothing committed). Run from the checkout root on a machine that is not overloaded; the
load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import hostile_corpus as hc  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--label", required=True)
    parser.add_argument("--cap-gib", type=float, default=6.0)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--only", help="run the cases whose name contains this text")
    args = parser.parse_args()
    env = {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory(prefix="hostile58-") as folder:
        tmp = Path(folder)
        env["BIOBENCH_CACHE"] = str(tmp / "cache")
        for what, argv, _ in hc.round5_cli_cases(tmp / "cli"):
            if args.only and args.only not in what:
                continue
            run = hc.run_limited(argv, address_space=int(args.cap_gib * 2**30), timeout=args.timeout, env=env,
                                 cwd=tmp)
            print(json.dumps({"case": what, "rc": run["rc"], "lines": len(run["lines"]), "traceback": run["traceback"],
                              "seconds": round(run["seconds"], 2), "peak_mib": round(run["peak_mib"]),
                              "last": run["lines"][-1][:160] if run["lines"] else ""}, ensure_ascii=True), flush=True)
        print(json.dumps({"label": args.label, "load_average": os.getloadavg()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
