"""A real browser loads the running leaderboard at 1,280 px: headless Chromium finds the French table with the
paper's reference rows and a measured model, its Model and Avg columns staying in place when the table scrolls
sideways, the vs-paper tab's empty state, and saves screenshots (in pytest's tmp dir, or $BIOBENCH_SCREENSHOTS). The server
also reads the hostile corpus's script results (tests/hostile_corpus.py: HTML/JS in every string field): every
tab is opened with `alert` hooked and a flag the payloads set, and nothing may run."""

import os
import subprocess
import sys
import time
import urllib.request

import pytest
from biobench.store import Result, result_path, run_key, write_result

from tests import hostile_corpus as hc
from tests.support import RESULTS_FIXTURES as FIXTURES
from tests.support import free_port, headless_chromium, screenshot, wait_http

pytestmark = [pytest.mark.slow, pytest.mark.browser]

# Every visible score table's headers: the text fits its cell (the label inside is no wider nor taller than the
# cell), no two headers' boxes overlap, and the scrolling box ends inside the window. Returns what fails.
HEADER_FIT = """
const out = [];
for (const t of document.querySelectorAll('table.lb-table')) {
  if (!t.offsetParent) continue;
  const box = t.parentElement.getBoundingClientRect();
  if (box.right > window.innerWidth + 1) out.push('box ends at ' + box.right + ' > ' + window.innerWidth);
  const ths = [...t.querySelectorAll('thead th')], rects = ths.map(th => th.getBoundingClientRect());
  ths.forEach((th, i) => {
    const label = th.querySelector('abbr') || th, r = label.getBoundingClientRect(), c = rects[i];
    if (r.width > c.width + 1 || th.scrollWidth > th.clientWidth + 1) out.push('cut: ' + th.innerText);
    for (let j = i + 1; j < ths.length; j++) {
      const d = rects[j];
      if (c.right > d.left + 1 && d.right > c.left + 1 && c.bottom > d.top + 1 && d.bottom > c.top + 1)
        out.push('overlap: ' + th.innerText + ' / ' + ths[j].innerText);
    }
  });
}
return out;
"""


# Every visible cell of every table on the page (the score tables, Gradio's dataframes, markdown tables such as
# About's protocol table): no word is broken over two lines ("ba tc h" in a header; "dia me d", "classi ficati on",
# "2 e- 0 5" in About's body cells) and no word ends outside its cell (cut). Returns what fails. In body cells, a
# model's name in the score tables' sticky column may wrap anywhere (it has a fixed width), and so may a token no
# cell can hold (the hostile corpus's 30-character markup, paths): those are left out, as is the zero-height sizing
# row Gradio's dataframes measure their columns with.
WORDS_IN_CELLS = """
const bodies = arguments[0] === 'td';
const out = [];
for (const cell of document.querySelectorAll(arguments[0])) {
  if (!cell.offsetParent) continue;
  if (bodies && cell.closest('table.lb-table') && cell.classList.contains('model')) continue;
  const box = cell.getBoundingClientRect();
  if (bodies && box.height < 1) continue;  // Gradio's sizing row, measured but never seen
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  let node;
  while ((node = walker.nextNode())) {
    if (!node.parentElement || !node.parentElement.offsetParent) continue;
    const re = /\\S+/g;
    let m;
    while ((m = re.exec(node.textContent))) {
      if (bodies && (m[0].length > 30 || /[<>]/.test(m[0]))) continue;
      const range = document.createRange();
      range.setStart(node, m.index);
      range.setEnd(node, m.index + m[0].length);
      const rects = [...range.getClientRects()].filter(r => r.width > 0);
      if (new Set(rects.map(r => Math.round(r.top))).size > 1) out.push('mid-word: ' + m[0]);
      if (rects.some(r => r.right > box.right + 1 || r.left < box.left - 1)) out.push('cut: ' + m[0]);
    }
  }
}
return out;
"""

# The French table: a measured row's scored cell lies inside the window (at 900 px the only measured column of a
# quick-check board was off-screen). Returns the scored cells' right edges, the window's width.
MEASURED_VISIBLE = """
const t = document.getElementById('lb-table-fr');
const cells = [...t.querySelectorAll('tbody tr.measured td')].filter(td => /\\d/.test(td.innerText) &&
  !td.classList.contains('model') && !td.classList.contains('avg'));
return [cells.map(td => td.getBoundingClientRect().right), window.innerWidth];
"""


def ran_scripts(driver) -> list:
    """What the payloads did so far: alert calls and the __xss flag (empty when nothing ran)."""
    return driver.execute_script("return (window.__alerts || []).concat(window.__xss ? ['__xss=' + window.__xss] : [])")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One leaderboard for the module's tests (each opens its own page, hence its own Gradio session): its start
    (imports, the board scan, the significance bootstrap) is the costly part, and no test changes what it serves."""
    tmp_path = tmp_path_factory.mktemp("leaderboard-server")
    port = free_port()
    hostile = tmp_path / "hostile"
    hc.script_results(hostile)
    smoke = tmp_path / "smoke"  # a run with protocol overrides: its own marked row, hidden until included
    write_result(result_path(smoke, "smoke-model", "fracco-30", 42), Result(
        model={"id": "smoke-model", "slug": "smoke-model", "name": "smoke-model"},
        task={"id": "fracco-30", "lang": "fr", "kind": "multilabel"}, seed=42, protocol={"hash": "smoke"},
        key=run_key("r", "d", "smoke", 42), metrics={"test": {"macro_f1": 0.192}},
        details={"overrides": {"epochs": {"run": 1, "protocol": 15}, "limit_train": {"run": 200, "protocol": None}}}),
        [{"id": 1, "gold": ["a"], "pred": ["a"]}, {"id": 2, "gold": ["b"], "pred": ["a"]}])
    # tasks outside the paper (a demo's, a user's): the Other tasks tab, never a column of the French table
    write_result(result_path(smoke, "smoke-model", "demo-cls", 42), Result(
        model={"id": "smoke-model", "slug": "smoke-model", "name": "smoke-model"},
        task={"id": "demo-cls", "lang": "fr", "kind": "classification"}, seed=42, protocol={"hash": "smoke"},
        key=run_key("r", "d", "smoke", 42), metrics={"test": {"macro_f1": 0.404}},
        details={"overrides": {"epochs": {"run": 1, "protocol": 15}}}), [{"id": 1, "gold": "a", "pred": "a"}])
    write_result(result_path(smoke, "user-model", "my-own-task", 42), Result(
        model={"id": "user-model", "slug": "user-model", "name": "user-model"},
        task={"id": "my-own-task", "lang": "fr", "kind": "classification"}, seed=42, protocol={"hash": "p"},
        key=run_key("r", "d", "p", 42), metrics={"test": {"macro_f1": 0.5}}), [{"id": 1, "gold": "a", "pred": "a"}])
    log = open(tmp_path / "server.log", "w+")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "biobench.cli", "leaderboard", "--results", str(FIXTURES), str(hostile), str(smoke),
         "--host", "127.0.0.1", "--port", str(port), "--n-boot", "200"],
        stdout=log, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "BIOBENCH_CACHE": str(tmp_path / "cache")},  # the significance cache stays in tmp
    )
    proc.stdout = log
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_http(url, proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One headless Chromium per test module (a test opens its page with browser.get and sets the window size it
    needs); the alert hook runs in every page it loads."""
    driver = headless_chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()


def test_french_table_in_headless_chromium(server, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    browser.set_window_size(1280, 1000)
    browser.get(server)
    time.sleep(8)  # let Gradio render and run its load events
    table = WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.ID, "lb-table-fr")))
    WebDriverWait(browser, 60).until(lambda d: "tiny-detour" in d.find_element(By.ID, "lb-table-fr").text)
    table = browser.find_element(By.ID, "lb-table-fr")
    text = table.text
    assert "CLM detour (Base, 10B) = ModernCamemBERT-bio-base (reported)" in text
    assert "MLM baseline (Base, 10B) (reported)" in text
    assert "tiny-detour" in text and "full-fr" in text
    headers = [th.text for th in table.find_elements(By.TAG_NAME, "th")]
    assert headers[:4] == ["Model", "Avg", "Rank", "fracco\n30"]  # narrow task columns, full id as tooltip
    assert "distemist" in headers and "meddialog\nfr" in headers  # never cut
    assert table.find_element(By.CSS_SELECTOR, "th.task abbr").get_attribute("title").startswith("fracco-30: benchmark")
    assert table.find_elements(By.CSS_SELECTOR, "td.top"), "significance shading is missing"
    browser.execute_script("arguments[0].scrollIntoView();", table)
    shot = screenshot(browser, tmp_path, "tab-french")
    print(f"screenshot: {shot}")

    # the table is wider than its box and scrolls sideways; Model and Avg stay where they are, the tasks move
    def lefts():
        return browser.execute_script(
            "const t = document.getElementById('lb-table-fr'); const r = t.querySelector('tbody tr');"
            "return [r.querySelector('td.model'), r.querySelector('td.avg'), r.querySelectorAll('td')[3]]"
            ".map(c => c.getBoundingClientRect().left);")
    box = table.find_element(By.XPATH, "..")
    assert "lb-scroll" in box.get_attribute("class")
    assert browser.execute_script("return arguments[0].scrollWidth > arguments[0].clientWidth", box)
    assert browser.execute_script("return getComputedStyle(arguments[0]).position",
                                  table.find_element(By.CSS_SELECTOR, "td.model")) == "sticky"
    before = lefts()
    scrolled = browser.execute_script("arguments[0].scrollLeft = 300; return arguments[0].scrollLeft", box)
    time.sleep(0.5)
    after, edge = lefts(), browser.execute_script("return arguments[0].getBoundingClientRect().left", box)
    assert scrolled > 30 and before[2] - after[2] == pytest.approx(scrolled, abs=1), (scrolled, before, after)
    assert after[0] == pytest.approx(edge, abs=1) and before[0] - after[0] < scrolled  # stuck at the box's edge
    assert after[1] - after[0] == pytest.approx(before[1] - before[0], abs=1)  # Avg stays beside Model
    screenshot(browser, tmp_path, "tab-french-scrolled")
    browser.execute_script("arguments[0].scrollLeft = 0", box)

    # the smoke runs: shown from the start, marked, where their model has no protocol result (issue 62 item 4: one
    # protocol result used to hide every smoke result of the language); one row per model, its name and cells
    # marked, the overrides in the tooltips; the toggle above the tabs says how many it governs
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "Show smoke runs (⚑ 2 smoke results of 1 model)" in body and "hidden (protocol" not in body
    toggle = browser.find_element(By.CSS_SELECTOR, "#lb-include-smoke input")
    assert toggle.is_displayed() and toggle.is_selected()  # not inside the closed accordion; ticked
    WebDriverWait(browser, 60).until(lambda d: "smoke-model" in d.find_element(By.ID, "lb-table-fr").text)
    marked = browser.find_element(By.CSS_SELECTOR, "#lb-table-fr td.model span.smoke")
    assert "⚑" in marked.text and "epochs 1 (protocol 15), limit_train 200" in marked.get_attribute("title")
    cell = browser.find_element(By.CSS_SELECTOR, "#lb-table-fr td[title^='smoke run: protocol overrides']")
    assert "19.2" in cell.text and "⚑" in cell.text
    assert "~smoke" not in browser.find_element(By.ID, "lb-table-fr").get_attribute("innerHTML")
    assert 'title="demo-cls:' not in browser.find_element(By.ID, "lb-table-fr").get_attribute("innerHTML")
    screenshot(browser, tmp_path, "tab-french-smoke")
    # the Other tasks tab: the demo and user tasks, one row per model, the smoke cell marked, no average
    next(b for b in browser.find_elements(By.CSS_SELECTOR, "button[role='tab']") if b.text.strip() == "Other tasks").click()
    other = WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "lb-other-fr"))
    headers = [th.text for th in other.find_elements(By.TAG_NAME, "th")]
    assert headers[:3] == ["Model", "demo\ncls", "my\nown\ntask"] and "Avg" not in headers
    rows = {r.find_element(By.CSS_SELECTOR, "td.model").text.split(" ⚑")[0]: r.text
            for r in other.find_elements(By.CSS_SELECTOR, "tbody tr")}
    assert set(rows) == {"smoke-model", "user-model"} and "40.4 ⚑" in rows["smoke-model"]
    screenshot(browser, tmp_path, "tab-other-tasks")
    toggle.click()  # unticked: the protocol's results only, and the one count, said once under the French table
    WebDriverWait(browser, 60).until(lambda d: "smoke-model" not in d.find_element(By.ID, "lb-other-fr").text)
    next(b for b in browser.find_elements(By.CSS_SELECTOR, "button[role='tab']") if b.text.strip() == "French").click()
    WebDriverWait(browser, 60).until(lambda d: "smoke-model" not in d.find_element(By.ID, "lb-table-fr").text)
    assert "⚑ 2 smoke results of 1 model hidden (protocol overrides)" in browser.find_element(By.TAG_NAME, "body").text
    toggle.click()
    WebDriverWait(browser, 60).until(lambda d: "smoke-model" in d.find_element(By.ID, "lb-table-fr").text)

    # header fit: at 1,280 and 900 px every header's text fits its cell, no two headers overlap, and the
    # table's box ends inside the window (it scrolls sideways instead of being cut)
    for width, lang in ((1280, "French"), (1280, "English"), (900, "French"), (900, "English")):
        browser.set_window_size(width, 1000)
        next(b for b in browser.find_elements(By.CSS_SELECTOR, "button[role='tab']") if b.text.strip() == lang).click()
        time.sleep(1)
        assert browser.execute_script(HEADER_FIT) == [], (width, lang)
        if width == 900:
            screenshot(browser, tmp_path, f"tab-{lang.lower()}-900px")
    browser.set_window_size(1280, 1000)
    next(b for b in browser.find_elements(By.CSS_SELECTOR, "button[role='tab']") if b.text.strip() == "French").click()

    # vs paper: no measured model here is one the paper reports: a note says what to evaluate, no empty dropdown
    next(b for b in browser.find_elements(By.CSS_SELECTOR, "button[role='tab']") if b.text.strip() == "vs paper").click()
    WebDriverWait(browser, 30).until(lambda d: "No measured model here is one the paper reports" in
                                     d.find_element(By.ID, "vp-note").text)
    assert not [e for e in browser.find_elements(By.ID, "vp-model") if e.is_displayed()]
    screenshot(browser, tmp_path, "tab-vs-paper")

    # the hostile corpus: its models are rows whose names show as text, its script language is no tab, and
    # opening every tab runs nothing (the hook itself is checked first: a hook that records nothing proves nothing)
    assert hc.PAYLOADS[0] in text and ran_scripts(browser) == []
    browser.execute_script("alert('probe'); document.body.insertAdjacentHTML('beforeend', arguments[0])", hc.PAYLOADS[0])
    WebDriverWait(browser, 10).until(lambda d: len(ran_scripts(d)) == 3)  # the hook, then the payload's alert + flag
    assert ran_scripts(browser) == ["probe", "1", "__xss=1"]
    browser.execute_script("window.__alerts = []; window.__xss = 0")
    tabs = [b.text.strip() for b in browser.find_elements(By.CSS_SELECTOR, "button[role='tab']")]
    assert "French" in tabs and "English" in tabs and not [t for t in tabs if "<" in t or "fr\"" in t]
    for label in tabs:
        button = next(b for b in browser.find_elements(By.CSS_SELECTOR, "button[role='tab']") if b.text.strip() == label)
        button.click()
        time.sleep(2)
        assert ran_scripts(browser) == [], f"a payload ran in the {label} tab"
        screenshot(browser, tmp_path, "tab-" + label.split(" (")[0].lower().replace(" ", "-"))
    problems = browser.find_element(By.TAG_NAME, "body").text
    assert "xss-lang" in problems and "is not a language code" in problems


def test_plots_tab_detail_view_and_loss_curve(server, browser, tmp_path):
    """The Plots tab: selecting a model's row in the efficiency table opens its detail view (where it comes
    from, lineage, pretraining cost, per-seed scores); the pretraining loss curve is drawn from train_log.jsonl."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.set_window_size(1280, 1000)  # the module's browser: whatever size the test before it left
    browser.get(server)
    time.sleep(8)
    tab = WebDriverWait(browser, 60).until(
        lambda d: next((b for b in d.find_elements(By.CSS_SELECTOR, "button[role='tab']") if b.text.strip() == "Plots"), None))
    tab.click()
    WebDriverWait(browser, 60).until(lambda d: "tiny-mlm" in d.find_element(By.ID, "lb-efficiency").text)
    efficiency = browser.find_element(By.ID, "lb-efficiency")
    assert "1.5 GPU-h" in efficiency.text and "1 x NVIDIA H100 80GB HBM3" in efficiency.text
    cell = next(c for c in efficiency.find_elements(By.CSS_SELECTOR, "[role='gridcell']") if c.text.strip() == "tiny-detour")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", cell)
    cell.click()
    WebDriverWait(browser, 60).until(lambda d: "runs/tiny-detour/final" in d.find_element(By.ID, "lb-detail").text)
    detail = browser.find_element(By.ID, "lb-detail").text
    assert "detour · from preset:tiny" in detail and "2.2M tokens, 1.5 GPU-h on 1 x NVIDIA H100 80GB HBM3" in detail
    assert "fr (epochs 1; hash sha256:222222222222)" in detail
    browser.execute_script("arguments[0].scrollIntoView();", browser.find_element(By.ID, "lb-efficiency"))
    screenshot(browser, tmp_path, "tab-plots-detail")
    seeds = browser.find_element(By.ID, "lb-detail-seeds").text
    assert "quaero-emea" in seeds and "diamed" in seeds and "mean" in seeds
    for payload in hc.PAYLOADS:  # each script-named model's detail view (its Markdown) runs nothing
        cell = next(c for c in browser.find_element(By.ID, "lb-efficiency").find_elements(By.CSS_SELECTOR, "[role='gridcell']")
                    if c.text.strip() == payload)
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", cell)
        cell.click()
        WebDriverWait(browser, 30).until(lambda d, p=payload: p.split("<")[-1][:12] in d.find_element(By.ID, "lb-detail").text)
        assert ran_scripts(browser) == [], f"a payload ran in the detail view of {payload!r}"
    loss = browser.find_element(By.ID, "lb-loss")
    browser.execute_script("arguments[0].scrollIntoView();", loss)
    plot = WebDriverWait(browser, 30).until(  # the figure, not the label's icon
        lambda d: [i for i in loss.find_elements(By.CSS_SELECTOR, "img") if i.size["width"] > 300])[0]
    assert plot.size["height"] > 100 and plot.get_attribute("src").startswith("data:image/")
    print(f"screenshots: {screenshot(browser, tmp_path, 'tab-plots-loss')}")


def test_the_cli_server_answers_the_json_routes(server):
    """`biobench leaderboard` serves the board's JSON next to its pages (the routes used to be added only by the
    Space's start, so the command line's server answered 404 on /api/v1/...)."""
    import json

    def get(path: str) -> tuple[int, dict]:
        try:
            with urllib.request.urlopen(server.rstrip("/") + path, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    status, tasks = get("/api/v1/tasks")
    assert status == 200 and "fracco-30" in [t["id"] for t in tasks["languages"]["fr"]]
    status, board = get("/api/v1/leaderboard?lang=fr")
    assert status == 200
    names = [row["name"] for row in board["rows"]]
    assert any("tiny-detour" in n for n in names), names
    keys = [row["key"] for row in board["rows"]]
    assert len(keys) == len(set(keys))  # one row per model
    status, missing = get("/api/v1/models/no-such-model")
    assert status == 404 and "no-such-model" in missing["error"]


@pytest.mark.parametrize("width", [1280, 900])
def test_every_tab_reads_at_1280_and_900_px(server, browser, tmp_path, width):
    """Issue 52 item 6: at 1,280 and 900 px, every tab's table headers keep whole words ("ba tc h", "war mu p",
    "me tad ata" before) inside their cells; issue 62 item 3: so do their body cells (About's protocol table broke
    "dia me d", "classi ficati on", "2 e- 0 5" and clipped its seeds column), and the French table has a measured
    score on screen; a screenshot per tab and width (BIOBENCH_SCREENSHOTS for the notes)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    browser.set_window_size(width, 900)
    browser.get(server)
    WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.ID, "lb-table-fr")))
    time.sleep(6)  # Gradio's load events
    failures = {}
    tabs = [b.text.strip() for b in browser.find_elements(By.CSS_SELECTOR, "button[role='tab']") if b.is_displayed()]
    for label in tabs:
        button = next((b for b in browser.find_elements(By.CSS_SELECTOR, "button[role='tab']")
                       if b.text.strip() == label and b.is_displayed()), None)
        if button is None:
            continue
        button.click()
        time.sleep(2)
        found = browser.execute_script(WORDS_IN_CELLS, 'th') + browser.execute_script(WORDS_IN_CELLS, 'td')
        if found:
            failures[label] = sorted(set(found))[:5]
        if label == "French":
            rights, window = browser.execute_script(MEASURED_VISIBLE)
            assert rights and min(rights) <= window, (width, rights, window)
        screenshot(browser, tmp_path, f"w{width}-tab-" + label.split(" (")[0].lower().replace(" ", "-"))
    assert not failures, failures
    # About's protocol table (under "⋯" at 900 px): whole words, and the seeds column reachable (the table
    # scrolls sideways instead of clipping it)
    about = next((b for b in browser.find_elements(By.CSS_SELECTOR, "button[role='tab']")
                  if b.text.strip() == "About" and b.is_displayed()), None)
    if about is None:
        browser.find_element(By.CSS_SELECTOR, "button.overflow-menu, .overflow-dropdown button, "
                             "button[aria-label*='more' i]").click()
        time.sleep(1)
        about = next(b for b in browser.find_elements(By.CSS_SELECTOR, "button") if b.text.strip() == "About"
                     and b.is_displayed())
    about.click()
    time.sleep(2)
    assert browser.execute_script(WORDS_IN_CELLS, 'td') == [], width
    seeds = browser.execute_script(  # scrolled to its end, the last column ends inside the tab, not clipped
        "const t = document.querySelector('#lb-about table'); t.scrollLeft = t.scrollWidth;"
        "const th = [...t.querySelectorAll('th')].pop(), box = document.getElementById('lb-about');"
        "return [th.innerText, th.getBoundingClientRect().right,"
        " Math.min(box.getBoundingClientRect().right, window.innerWidth)];")
    assert seeds[0] == "seeds" and seeds[1] <= seeds[2] + 1, (width, seeds)
