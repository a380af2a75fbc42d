"""Before/after figures of issue 51 (hostile input, round four) for docs/RELIABILITY.md: each case as a real
`biobench` process under an address-space cap (resource.RLIMIT_AS in the child, as the issue measured), with its
rc, output lines, traceback, wall time and the child's own peak RSS.

    python scripts/hostile_round4.py --label after
    python scripts/hostile_round4.py --label before --pythonpath /tmp/main-tree   # a tree where `biobench` is main

The cases are tests/hostile_corpus.py's (generated, nothing committed). Run from the checkout root under
`/work/bin/cpuslot --both` on a shared machine; the load average is printed with the figures.
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


def cases(tmp: Path) -> list[tuple[str, list[str]]]:
    """(what, argv): the command lines of the issue, and the results-folder readers on a planted folder."""
    out = [(what, argv) for what, argv, _ in hc.round4_cli_cases(tmp / "cli")]
    corpus = tmp / "cli" / "c.txt"
    tiny = ["pretrain", "--model", "preset:tiny", "--corpus", str(corpus), "--tokens", "2K", "--seq-len", "32",
            "--batch-size", "4", "--save-minutes", "0", "--no-progress", "--threads", "1", "--device", "cpu",
            "--cache-dir", str(tmp / "tokens")]
    config = tmp / "freeze.toml"
    config.write_text(f'model = "preset:tiny"\ncorpus = "{corpus}"\ntokens = 2000\nout = "{tmp / "o4"}"\n'
                      "freeze = [1]\n")
    out += [("pretrain --freeze 0-1@clm (a tiny run)", [*tiny, "--freeze", "0-1@clm", "--out", str(tmp / "o1")]),
            ("pretrain --max-documents 50 (a tiny run)", [*tiny, "--max-documents", "50", "--out", str(tmp / "o2")]),
            ("pretrain --config with freeze = [1]", ["pretrain", "--config", str(config)]),
            ("prefetch --model org/..", ["prefetch", "--model", "org/.."])]
    root = tmp / "results"
    for slug in ("good-1", "good-2"):
        for seed in (42, 43):
            hc.good_result(root, slug, seed)
    hc.escaping_results(root, tmp / "outside")
    out += [("leaderboard --export x.parquet (planted folder)", ["leaderboard", "--results", str(root), "--no-reference",
                                                                  "--export", str(tmp / "x.parquet")]),
            ("results push --dry-run (planted folder)", ["results", "push", "org/r", "--results", str(root),
                                                         "--dry-run", str(tmp / "push")])]
    return out


def secret_published(tmp: Path) -> dict[str, bool]:
    """Whether the secret behind the planted links reached the export or the pushed folder."""
    found = {}
    for name, path in (("export", tmp / "x.parquet"), ("push", tmp / "push" / "results.parquet")):
        found[name] = path.is_file() and hc.SECRET.encode() in path.read_bytes()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--label", required=True)
    parser.add_argument("--pythonpath", help="a folder to put first on PYTHONPATH (a tree of another revision)")
    parser.add_argument("--cap-gib", type=float, default=6.0)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--only", help="run the cases whose name contains this text")
    args = parser.parse_args()
    env = {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    rows = []
    with tempfile.TemporaryDirectory(prefix="hostile51-") as folder:
        tmp = Path(folder)
        env["BIOBENCH_CACHE"] = str(tmp / "cache")
        for what, argv in cases(tmp):
            if args.only and args.only not in what:
                continue
            run = hc.run_limited(argv, address_space=int(args.cap_gib * 2**30), timeout=args.timeout, env=env,
                                 cwd=tmp)
            row = {"case": what, "rc": run["rc"], "lines": len(run["lines"]), "traceback": run["traceback"],
                   "seconds": round(run["seconds"], 2), "peak_mib": round(run["peak_mib"]),
                   "last": run["lines"][-1][:160] if run["lines"] else ""}
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False), flush=True)
        print(json.dumps({"label": args.label, "secret_published": secret_published(tmp),
                          "load_average": os.getloadavg()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
