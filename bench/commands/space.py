"""`biobench space init`: write a Hugging Face Space that serves the leaderboard from a results dataset."""

from __future__ import annotations

import argparse

from biobench.leaderboard.space import write_space

EPILOG = """examples:
  biobench space init my-space/ --results hf://datasets/my-org/biobench-results
  biobench space init my-space/ --results hf://datasets/my-org/biobench-results --queue hf://datasets/my-org/requests \\
      --space my-org/leaderboard
  cd my-space && python app.py        # try it locally, then `hf upload my-org/leaderboard . --repo-type space`"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "space", description="A Gradio Space (README metadata, app.py, requirements.txt) that serves the leaderboard from a "
        "results dataset and, with --queue, takes evaluation requests.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    init = sub.add_parser("init", help="write README.md, app.py and requirements.txt into DIR",
                          description="Write a Hugging Face Space into DIR: README.md with the Space metadata (sdk: "
                          "gradio, app_file: app.py), app.py serving the leaderboard from the results dataset "
                          "(rescanned every --refresh-minutes), a wheel of this biobench in wheels/ and requirements.txt "
                          "installing it with the leaderboard extra. Run it locally with `python app.py` (serves on "
                          "127.0.0.1; 0.0.0.0 on a Space).",
                          epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    init.add_argument("out", metavar="DIR", help="the Space folder (created; existing Space files are not replaced)")
    init.add_argument("--results", required=True, help="results dataset hf://datasets/ORG/NAME (or a local copy)")
    init.add_argument("--queue", help="request queue hf://datasets/ORG/NAME the Submit tab writes to (default: none; "
                      "the tab shows the `biobench submit` command)")
    init.add_argument("--refresh-minutes", type=float, default=10.0, help="rescan the results this often; 0: only "
                      "with the Refresh button (default: 10)")
    init.add_argument("--title", default="biobench leaderboard", help="the Space's title (default: %(default)s)")
    init.add_argument("--requirement", help="how the Space installs biobench, one requirement line (default: a wheel "
                      "of this biobench built into DIR/wheels/; e.g. 'biobench[leaderboard] @ "
                      "git+https://github.com/ORG/biobench@COMMIT')")
    init.add_argument("--space", metavar="ORG/NAME", help="the Space's id: requirements.txt then names the wheel by "
                      "its URL in that Space (a Space installs requirements.txt before copying the repository)")
    init.add_argument("--local-ok", action="store_true", help="accept a local --results/--queue folder (an app.py "
                      "run on this machine can read it; a Space cannot)")
    init.add_argument("--trusted-proxy", action="append", default=None, metavar="ADDR",
                      help="an address or network whose X-Forwarded-For header names the visitor (repeatable; "
                      "default: the hub's own proxy, 10.0.0.0/8, when app.py runs inside a Space, none elsewhere; "
                      "the Space variable BIOBENCH_TRUSTED_PROXY overrides it)")
    init.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    written = write_space(args.out, args.results, queue=args.queue, refresh_minutes=args.refresh_minutes,
                          title=args.title, requirement=args.requirement, space=args.space,
                          local_ok=args.local_ok, trusted_proxy=args.trusted_proxy)
    print(f"wrote {', '.join(str(p) for p in written)}; run it with `cd {args.out} && python app.py`, publish it "
          f"with `hf upload ORG/NAME {args.out} --repo-type space`")
    return 0
