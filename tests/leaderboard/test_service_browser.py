"""The leaderboard as a service, in a real browser (1280 px wide): a request submitted through the form is run
by `biobench worker --once`, Refresh shows the new results and the Queue says `finished`; the Space that
`biobench space init` writes serves a local copy of a results dataset. Screenshots of each tab are saved."""

import json
import os
import subprocess
import sys
import time

import pytest

from tests.support import RESULTS_FIXTURES as FIXTURES
from tests.support import free_port, headless_chromium, screenshot, wait_http

pytestmark = [pytest.mark.slow, pytest.mark.browser]



@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One headless Chromium for the module (tests/support.py: the alert hook runs in every page)."""
    driver = headless_chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield driver
    driver.quit()


def serve(argv, tmp_path, env_extra=None, cwd=None):
    log = open(tmp_path / "server.log", "w+")  # noqa: SIM115 - closed by stop()
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, text=True, cwd=cwd,
                            env={**os.environ, "BIOBENCH_CACHE": str(tmp_path / "cache"), **(env_extra or {})})
    proc.stdout = log
    return proc


def stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
    proc.stdout.close()


def tab(browser, name):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    button = WebDriverWait(browser, 60).until(lambda d: next(
        (b for b in d.find_elements(By.CSS_SELECTOR, "button[role='tab']") if b.text.strip().startswith(name)), None))
    button.click()
    time.sleep(1)


def field(browser, elem_id, kind="textarea, input"):
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, ", ".join(f"#{elem_id} {k.strip()}" for k in kind.split(",")))


def text_of(browser, elem_id):
    from selenium.webdriver.common.by import By

    return browser.find_element(By.ID, elem_id).text


def html_of(browser, elem_id):
    from selenium.webdriver.common.by import By

    return browser.find_element(By.ID, elem_id).get_attribute("innerHTML")


def test_submit_worker_refresh_and_queue(browser, tiny_mlm_dir, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.set_window_size(1280, 1100)
    results, q = tmp_path / "results", tmp_path / "queue"
    results.mkdir()
    port = free_port()
    proc = serve([sys.executable, "-m", "biobench.cli", "leaderboard", "--results", str(results), "--queue", str(q),
                  "--host", "127.0.0.1", "--port", str(port), "--n-boot", "100",
                  # the public form takes a local model folder only under a folder the operator allows (#27)
                  "--allow-local-models", str(tiny_mlm_dir.parent)], tmp_path)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_http(url, proc)
        browser.get(url)
        time.sleep(6)
        screenshot(browser, tmp_path, "service-french-empty")
        tab(browser, "vs paper")  # nothing measured yet: the note, no empty dropdown
        assert "No measured model here is one the paper reports" in text_of(browser, "vp-note")
        assert not [e for e in browser.find_elements(By.ID, "vp-model") if e.is_displayed()]
        tab(browser, "Submit")
        field(browser, "sb-model").send_keys(str(tiny_mlm_dir))
        field(browser, "sb-tasks").send_keys("demo-cls")
        field(browser, "sb-seeds").send_keys("1")
        next(b for b in browser.find_elements(By.CSS_SELECTOR, "button") if "Smoke-run overrides" in b.text).click()
        time.sleep(1)
        for elem_id, value in (("sb-epochs", "1"), ("sb-max-length", "32"), ("sb-limit-train", "40")):
            box = field(browser, elem_id, "input")
            box.clear()
            box.send_keys(value)
        # the model's metadata, stated in the form (#41): shown on the Model tab once the results are in
        next(b for b in browser.find_elements(By.CSS_SELECTOR, "button") if "Model metadata" in b.text).click()
        time.sleep(1)
        field(browser, "sb-params").send_keys("1.5M")
        field(browser, "sb-training-data").send_keys("pubmed, e3c")
        browser.find_element(By.ID, "sb-submit").click()
        WebDriverWait(browser, 60).until(lambda d: "submitted" in text_of(d, "sb-message"))
        screenshot(browser, tmp_path, "service-submit")
        tab(browser, "Queue")
        WebDriverWait(browser, 30).until(lambda d: "pending" in text_of(d, "sb-queue"))
        request = json.loads(next((q / "requests").glob("*.json")).read_text())
        assert request["overrides"] == {"epochs": 1, "max_length": 32, "limit_train": 40}
        assert request["metadata"] == {"params": 1_500_000, "training_data": ["pubmed", "e3c"]}
        # the form records a hash of the visitor, never their address (the per-visitor pending limit, #27)
        assert request["submitter"].startswith("visitor-") and request["tasks"] == ["demo-cls"]

        worker = subprocess.run([sys.executable, "-m", "biobench.cli", "worker", "--queue", str(q), "--results",
                                 str(results), "--once"], capture_output=True, text=True, timeout=300,
                                env={**os.environ, "BIOBENCH_CACHE": str(tmp_path / "cache")})
        assert worker.returncode == 0 and "finished" in worker.stdout, worker.stdout + worker.stderr

        browser.find_element(By.ID, "sb-queue-refresh").click()
        # finished, with its results not rescanned yet ("finished" alone is also a column header)
        WebDriverWait(browser, 30).until(lambda d: "not on the board yet" in text_of(d, "sb-queue"))
        tab(browser, "Other tasks")
        assert 'title="demo-cls:' not in html_of(browser, "lb-other-tasks")  # no column before the refresh
        browser.find_element(By.ID, "lb-refresh").click()
        WebDriverWait(browser, 60).until(lambda d: "rescanned" in text_of(d, "lb-refresh-note"))
        assert ": 1 run" in text_of(browser, "lb-refresh-note")
        # the request's run is a smoke run (epochs 1, 40 train examples) on a task outside the paper: the only
        # measured result, so the board says so in a banner and shows it from the start, marked, in Other tasks
        WebDriverWait(browser, 60).until(lambda d: 'title="demo-cls:' in html_of(d, "lb-other-tasks"))
        assert "Every measured result on this board is a smoke run" in text_of(browser, "lb-smoke-banner")
        assert "Show smoke runs (⚑ 1 smoke result of 1 model)" in browser.find_element(By.TAG_NAME, "body").text
        assert 'title="demo-cls:' not in html_of(browser, "lb-table-fr")
        WebDriverWait(browser, 30).until(lambda d: "tiny-modernbert" in text_of(d, "lb-other-tasks"))  # the new row
        screenshot(browser, tmp_path, "service-french-refreshed")
        tab(browser, "Compare")  # the refresh offered the new model: a measured model is preselected
        WebDriverWait(browser, 30).until(lambda d: "tiny-modernbert" in (d.find_element(
            By.CSS_SELECTOR, "#lb-compare-a input").get_attribute("value") or ""))
        # one measured French model, on a task no reported row has: no B, and the tab says what to do
        WebDriverWait(browser, 30).until(lambda d: "Only one measured French model" in text_of(d, "lb-compare-note"))
        assert "biobench eval --model ORG/NAME --lang fr" in text_of(browser, "lb-compare-note")
        screenshot(browser, tmp_path, "service-compare-one-model")
        # the finished smoke request: its score and its board row, found by model identity; a click on it (with
        # smoke runs hidden again) ticks the toggle, opens Other tasks and outlines the row
        field(browser, "lb-include-smoke", "input").click()
        WebDriverWait(browser, 30).until(lambda d: "tiny-modernbert" not in text_of(d, "lb-other-tasks"))
        tab(browser, "Queue")
        browser.find_element(By.ID, "sb-queue-refresh").click()
        # the row is named after the model's folder, which pytest numbers (tiny-modernbert0, ...)
        board_row = f"Other tasks (French): {tiny_mlm_dir.name} ⚑ smoke"
        WebDriverWait(browser, 30).until(lambda d: board_row in text_of(d, "sb-queue"))
        queue_text = text_of(browser, "sb-queue")
        assert "results on the board" in queue_text and "not on the board yet" not in queue_text
        score = next(c for c in browser.find_elements(By.CSS_SELECTOR, "#sb-queue [role='gridcell']")
                     if c.text.strip().replace(".", "", 1).isdigit())
        assert 0 <= float(score.text) <= 100
        widths = browser.execute_script(  # no column squeezed to one letter per line
            "return [...document.querySelectorAll('#sb-queue thead th')].map(th => th.getBoundingClientRect().width)")
        assert min(widths) > 40, widths
        screenshot(browser, tmp_path, "service-queue")
        cell = next(c for c in browser.find_elements(By.CSS_SELECTOR, "#sb-queue [role='gridcell']")
                    if c.text.strip() == "finished")
        cell.click()
        WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "lb-other-tasks").is_displayed())
        WebDriverWait(browser, 30).until(lambda d: "tiny-modernbert" in text_of(d, "lb-other-tasks"))
        row = next(r for r in browser.find_elements(By.CSS_SELECTOR, "#lb-other-fr tbody tr") if "tiny-modernbert" in r.text)
        WebDriverWait(browser, 10).until(lambda d: "solid" in (row.get_attribute("style") or ""))
        screenshot(browser, tmp_path, "service-queue-link")
        # the Model tab: the request's model with the metadata stated in the form, and its smoke run
        tab(browser, "Model")
        WebDriverWait(browser, 30).until(lambda d: "stated by the submitter" in text_of(d, "lb-model-panel"))
        panel = text_of(browser, "lb-model-panel")
        assert "1,500,000" in panel and "pubmed, e3c" in panel and tiny_mlm_dir.name in panel
        assert "demo-cls" in text_of(browser, "lb-model-results") and "⚑ smoke" in text_of(browser, "lb-model-results")
        screenshot(browser, tmp_path, "service-model-tab")
        print(f"screenshots in {os.environ.get('BIOBENCH_SCREENSHOTS') or tmp_path}")
    finally:
        stop(proc)


def test_the_generated_space_serves_a_local_copy(browser, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    copy = tmp_path / "dataset"
    subprocess.run([sys.executable, "-m", "biobench.cli", "results", "push", "acme/results", "--results",
                    str(FIXTURES), "--dry-run", str(copy)], check=True, capture_output=True)
    space = tmp_path / "space"
    subprocess.run([sys.executable, "-m", "biobench.cli", "space", "init", str(space), "--results",
                    "hf://datasets/acme/results"], check=True, capture_output=True)
    assert "sdk: gradio" in (space / "README.md").read_text() and "app_file: app.py" in (space / "README.md").read_text()
    browser.set_window_size(1280, 1000)  # the module's browser, after the service test's 1280 x 1100
    port = free_port()
    proc = serve([sys.executable, "app.py"], tmp_path, cwd=space, env_extra={
        "BIOBENCH_RESULTS": str(copy), "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1",
        "BIOBENCH_REFRESH_MINUTES": "0"})
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_http(url, proc)
        browser.get(url)
        WebDriverWait(browser, 60).until(lambda d: "tiny-detour" in d.find_element(By.ID, "lb-table-fr").text)
        assert "(reported)" in text_of(browser, "lb-table-fr")
        tab(browser, "Submit")
        assert "cannot write requests" in browser.find_element(By.TAG_NAME, "body").text
        screenshot(browser, tmp_path, "space")
    finally:
        stop(proc)
