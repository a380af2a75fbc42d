"""The board model: what the leaderboard, `compare`, `results` and the worker compute over results folders.

Below the UI (leaderboard/ only presents it) and above the store: scanning results folders and the paper's
reference rows (`scan`), the board's data model (`entries`), aggregation (`board`), significance groups
(`significance`) and their cache (`cache`), A-vs-B comparisons (`compare`), the reproduction verdicts
(`reproduction`), the published results dataset (`dataset`) and the model-folder resolution `compare` needs
(`models`). Never imports torch, the UI or the service.
"""
