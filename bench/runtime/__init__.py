"""The runtime layer: what every biobench package may use and what imports no biobench package.

Why a layer of its own: fine-tuning, the results store, the leaderboard, the task generators and pretraining all
need atomic file writes and the full-disk check (files), the device/dtype/attention choice (device), progress
lines (progress), metric reporting (reporting) and torch.compile (compiling). Kept under `training/` they made the
leaderboard and `tasks` import the pretraining package. Modules here import only the standard library, third-party
packages and `biobench.errors`; tests/test_architecture.py enforces it.
"""
