"""Side-by-side performance scripts: `python -m biobench.perf.<name>` (finetune_speed, pretrain_speed, scaling)."""
