"""The leaderboard: results folders + the paper's reference rows -> tables -> Gradio app.

Never imports torch (fast start). Modules: results (tolerant scanning), board (aggregation),
compare (significance, A vs B), tables (export, HTML, terminal text), plots, app (Gradio).
"""
