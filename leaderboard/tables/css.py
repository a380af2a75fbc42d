"""The style sheet of the leaderboard's tables (the app passes it to Gradio)."""

from __future__ import annotations

CSS = """
.lb-table {border-collapse: separate; border-spacing: 0; font-size: 13px;}
.lb-table th, .lb-table td {border-bottom: 1px solid #ddd; padding: 3px 5px; text-align: right; white-space: nowrap;
  background: #fff;}
.lb-table th {background: #f3f4f6; font-weight: 600; font-size: 12px; vertical-align: bottom; line-height: 1.15;}
.lb-table th.task {white-space: nowrap; min-width: 40px;}
.lb-table th abbr {text-decoration: none; cursor: help;}
.lb-table td.model, .lb-table th.model, .lb-table td.meta, .lb-table th.meta {text-align: left;}
.lb-table td.model, .lb-table th.model {position: sticky; left: 0; z-index: 2; width: 230px; min-width: 230px;
  max-width: 230px; box-sizing: border-box; white-space: normal; overflow-wrap: anywhere;}
.lb-table td.avg, .lb-table th.avg {position: sticky; left: 230px; z-index: 2; box-sizing: border-box;
  min-width: 58px; border-right: 2px solid #ccc;}
.lb-table td.meta {color: #555; font-size: 12px; white-space: normal; min-width: 220px;}
.lb-table td.top {background: #e6f4ea;}
.lb-table tr.reported td.model {font-style: italic;}
.lb-table .ci {color: #777; font-size: 10px; margin-left: 2px;}
.lb-table .smoke, .lb-table .degenerate {color: #b45309; cursor: help;}
.lb-table .contaminated {color: #b91c1c; cursor: help;}
.lb-notes {font-size: 12px; color: #444;}
.lb-scroll {overflow-x: auto; max-width: 100%;}
.lb-banner {background: #fff7ed; border: 1px solid #f59e0b; border-radius: 4px; padding: 6px 10px; color: #7c2d12;}
/* every table's headers (Gradio dataframes in the Task, Model and Compare tabs, the About tab's markdown tables):
   whole words only, never broken mid-word ("ba tc h", "war mu p", "me tad ata" at 1,280 px): a narrow column
   grows to its longest word and the table scrolls sideways instead */
table th, table th * {word-break: keep-all !important; overflow-wrap: normal !important; hyphens: none !important;}
/* their body cells too (issue 62 item 3: the About tab's protocol table broke "dia me d", "classi ficati on",
   "2 e- 0 5"); the score tables keep their own rules (a model name wraps anywhere in its sticky column) */
table:not(.lb-table) td, table:not(.lb-table) td * {word-break: keep-all !important;
  overflow-wrap: normal !important; hyphens: none !important;}
/* a markdown table wider than its tab scrolls sideways instead of clipping its last columns (About's seeds);
   About's protocol values are short settings ("2e-05", "hf-sequence", "quaero-emea") that a line break at their
   hyphen splits as badly as mid-word: one line each */
.prose table:not(.lb-table) {display: block; max-width: 100%; overflow-x: auto;}
#lb-about td {white-space: nowrap;}
"""
