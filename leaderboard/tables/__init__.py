"""Board -> tables, one module per job: the controls' filters (`filters`), the row model (`rows`), the columns
declared once for every view (`columns`), the app's numeric frames (`frames`), the export files (`export`), the
paper-style HTML table (`html`), the terminal table (`text`), escaping for HTML and Markdown (`escape`), the style
sheet (`css`), fine-tuning and pretraining cost (`costs`) and the one-model views (`detail`).

Display conventions (as in the paper's Tables 1-2): macro-F1 in percent with one decimal, best per column
in bold, second underlined (ranked on the displayed, rounded values, ties share the mark). A partial
average is shown as e.g. "58.1*" with a footnote giving k/n tasks; it is never ranked against complete ones.
"""
