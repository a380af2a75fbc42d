"""The leaderboard's presentation: the Gradio app, its tables, plots and service views, and the Space it writes.

Never imports torch (fast start). What it shows is computed below it, in `biobench.standings` (scanning, aggregation,
significance, comparisons, the results dataset); this package only formats and wires it. Modules: tables (export,
HTML, terminal text), plots, service_views (Submit, Queue, vs paper), app (Gradio), space (a Hugging Face Space).
"""
