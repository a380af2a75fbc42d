"""The evaluation engine: the protocols, model loading, the fine-tuning loop, the grid of runs and its runs in
parallel processes (`biobench eval` and the Python API call these; docs/ARCHITECTURE.md)."""
