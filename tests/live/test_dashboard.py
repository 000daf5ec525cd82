"""The dashboard at /ui in a real headless Chromium against a live `dpfit serve`.

Debian's ``chromium`` + ``chromium-driver`` driven by Selenium. Without them the tests skip —
except under ``CI=true``, where they fail (``.ci/run`` installs the packages).

What is checked: sign-in with a key (kept in sessionStorage, never in the URL); the owner view
with a budget burn-down chart that has one point per ledger row, the ledger, and the grants table
(analyst, granted at, cap, ε spent) whose revoke button revokes after a confirming second click;
the analyst view with the job's progress reaching its total by polling, the granted budget, and a
coefficients chart with one bar per released coefficient; and that the browser made no request to
any other origin (Chrome's performance log: every ``Network.requestWillBeSent``). Swagger UI and
ReDoc render with no outside request too. Screenshots of each view go to ``DPFIT_SCREENSHOTS``
(default: the test's tmp dir).

A dashboard owners can act on (issue 26 item 5), at 900 and 1400 px viewports: the validation
report on the owner's card (a label typo shows loudly); the ledger's ε added at δ_B per row with
the running total (the column sums to ε spent); a burn-down by charge order that keeps a burst of
15 jobs readable, with round ticks and a tooltip per point (job, analyst, ε); dataset names
beside ids; a failed job's reason; the view labelled by the key's role (admin, owner, analyst);
``/`` → ``/ui``; a sign-in card that says where keys come from. Layout is checked on bounding
rectangles (``layout_problems``): nothing wider than the viewport, no table or cell whose content
is cut, no chart overlapping its facts, no two tick labels overlapping, the key elements visible.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.live import LiveServer
from tests.support.walkthrough import COPIES, credit_dataset, fresh_credit_copy, logistic_job

CHROMIUM = Path(os.environ.get("DPFIT_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("DPFIT_CHROMEDRIVER", "/usr/bin/chromedriver"))
WAIT = 60.0

pytestmark = pytest.mark.slow


def _require_chromium() -> None:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium package")
    if missing:
        message = "dashboard tests need " + ", ".join(missing)
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message + " (CI=true: browser tests must run)")
        pytest.skip(message)


@pytest.fixture
def browser() -> Iterator[Any]:
    _require_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="dpfit-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("DPFIT_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def requested_urls(driver: Any) -> list[str]:
    """Every URL the browser asked for since the last call (CDP events in the performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


NETWORK_SCHEMES = ("http:", "https:", "ws:", "wss:", "ftp:")


def assert_same_origin(urls: list[str], server: LiveServer) -> None:
    """Every request with a network scheme went to the server's origin (``data:``/``blob:``
    URLs and the browser's own ``chrome://`` pages never reach a network)."""
    network = [u for u in urls if u.lower().startswith(NETWORK_SCHEMES)]
    assert any(u.startswith(server.base_url + "/") for u in network), urls
    outside = [u for u in network if not u.startswith(server.base_url + "/")]
    assert outside == [], f"requests left the host: {outside}"


def wait_until(driver: Any, script: str, what: str, timeout: float = WAIT) -> Any:
    """Poll a JavaScript expression in the page until it is truthy; returns its value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(f"return ({script});")
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def sign_in(driver: Any, server: LiveServer, key: str) -> None:
    driver.get(f"{server.base_url}/ui")
    wait_until(driver, "document.getElementById('sign-in') !== null", "the sign-in form")
    driver.execute_script("sessionStorage.clear(); document.body.dataset.ready = '';")
    field = driver.find_element("id", "api-key")
    field.send_keys(key)
    driver.find_element("css selector", "#sign-in button[type=submit]").click()
    wait_until(driver, "document.body.dataset.ready === 'true'", "the dashboard")
    assert key not in driver.current_url
    assert driver.execute_script("return sessionStorage.getItem('dpfit.apiKey')") == key
    assert key not in driver.execute_script("return document.cookie")


def wait_job(server: LiveServer, key: str, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 180
    with server.client(key) as client:
        while time.monotonic() < deadline:
            job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
            if job["status"] in ("succeeded", "failed", "cancelled"):
                return job
            time.sleep(0.3)
    raise AssertionError(f"job {job_id} did not finish")


@pytest.fixture
def story(sqlite_server: LiveServer) -> dict[str, Any]:
    """An owner's dataset granted to an analyst, with two finished jobs (two burn-down steps)."""
    owner = sqlite_server.key("dash-olivia", "owner")
    analyst = sqlite_server.key("dash-ann", "analyst")
    with sqlite_server.client(owner) as client:
        response = client.post("/v1/datasets", json=credit_dataset(epsilon=5.0))
        assert response.status_code == 201, response.text
        dataset_id = response.json()["id"]
        grant = client.post(f"/v1/datasets/{dataset_id}/grants", json={"principal": "dash-ann"})
        assert grant.status_code == 201, grant.text
    jobs = []
    with sqlite_server.client(analyst) as client:
        for epsilon in (0.5, 1.0):
            response = client.post("/v1/jobs", json=logistic_job(dataset_id, epsilon=epsilon))
            assert response.status_code == 202, response.text
            jobs.append(wait_job(sqlite_server, analyst, response.json()["id"]))
    assert all(j["status"] == "succeeded" for j in jobs), jobs
    return {"owner": owner, "analyst": analyst, "dataset_id": dataset_id, "jobs": jobs}


def test_owner_sees_burn_down_ledger_and_grants_and_revokes_one(
    browser: Any, sqlite_server: LiveServer, story: dict[str, Any], shots: Path
) -> None:
    sqlite_server.key("dash-bob", "analyst")
    grants_path = f"/v1/datasets/{story['dataset_id']}/grants"
    with sqlite_server.client(story["owner"]) as client:
        capped = client.post(grants_path, json={"principal": "dash-bob", "epsilon_cap": 1.5})
        assert capped.status_code == 201, capped.text
        granted = client.get(grants_path).json()
    requested_urls(browser)  # drop anything before the test
    sign_in(browser, sqlite_server, story["owner"])
    card = f"article.dataset[data-dataset='{story['dataset_id']}']"
    # The grants table: one row per grant (analyst, granted at, cap, ε spent) with a revoke button.
    grant_rows = browser.find_elements("css selector", f"{card} table.grants tbody tr")
    cells = [[td.text for td in row.find_elements("css selector", "td")] for row in grant_rows]
    assert [c[0] for c in cells] == ["dash-ann", "dash-bob"]
    assert [c[2] for c in cells] == ["none", "1.50"]
    assert granted[0]["epsilon_spent"] > 0
    assert float(cells[0][3]) == pytest.approx(granted[0]["epsilon_spent"], rel=1e-2)
    assert float(cells[1][3]) == 0.0
    assert cells[0][1] == granted[0]["created_at"][:19].replace("T", " ")
    assert all(r.find_element("css selector", "button.revoke").text == "Revoke" for r in grant_rows)
    wait_until(browser, f'document.querySelector("{card} svg.burn-down path.spent")', "chart")
    points = browser.execute_script(
        f'return document.querySelectorAll("{card} svg.burn-down circle.point").length'
    )
    assert points == 2  # one per charge
    budget_line = browser.find_elements("css selector", f"{card} svg.burn-down line.budget")
    assert len(budget_line) == 1
    ledger_rows = browser.find_elements("css selector", f"{card} table.ledger tbody tr")
    assert len(ledger_rows) == 2
    assert "dash-ann" in ledger_rows[0].text
    assert browser.execute_script("return document.body.dataset.view") == "owner"
    browser.save_screenshot(str(shots / "owner.png"))
    urls = requested_urls(browser)
    assert any(u.endswith("/budget/history") for u in urls)
    assert any(u.endswith("/grants") for u in urls)
    assert_same_origin(urls, sqlite_server)

    # Revoke dash-bob: the first click asks to confirm, the second revokes and redraws.
    bob = f"{card} table.grants tr[data-principal='dash-bob'] button.revoke"
    browser.find_element("css selector", bob).click()
    assert "Confirm" in browser.find_element("css selector", bob).text
    with sqlite_server.client(story["owner"]) as client:
        assert len(client.get(grants_path).json()) == 2  # nothing revoked by the first click
    browser.find_element("css selector", bob).click()
    wait_until(browser, f'document.querySelector("{bob}") === null', "the revoked row to go")
    remaining = browser.find_elements("css selector", f"{card} table.grants tbody tr")
    assert [r.get_attribute("data-principal") for r in remaining] == ["dash-ann"]
    with sqlite_server.client(story["owner"]) as client:
        assert [g["principal"] for g in client.get(grants_path).json()] == ["dash-ann"]
    urls = requested_urls(browser)
    assert any(u.endswith("/grants/dash-bob/revoke") for u in urls)
    assert_same_origin(urls, sqlite_server)


def test_analyst_sees_jobs_progress_budget_and_model(
    browser: Any, sqlite_server: LiveServer, story: dict[str, Any], shots: Path
) -> None:
    with sqlite_server.client(story["analyst"]) as client:
        response = client.post(
            "/v1/jobs", json=logistic_job(story["dataset_id"], epsilon=0.25, l2=0.02)
        )
        assert response.status_code == 202, response.text
        live_job = response.json()
    requested_urls(browser)
    sign_in(browser, sqlite_server, story["analyst"])
    assert browser.execute_script("return document.body.dataset.view") == "analyst"
    row = f"tr[data-job='{live_job['id']}']"
    # The page polls: the job that was queued at submission reaches its total without a reload.
    wait_until(browser, f"document.querySelector(\"{row}\")?.dataset.status === 'succeeded'", "job")
    progress = browser.execute_script(
        f'const p = document.querySelector("{row} progress"); return [p.value, p.max];'
    )
    total = live_job["progress"]["total"]
    assert progress == [total, total]
    granted = browser.find_element("css selector", f"tr[data-dataset='{story['dataset_id']}']")
    with sqlite_server.client(story["analyst"]) as client:
        budget = client.get(f"/v1/datasets/{story['dataset_id']}/budget").json()
    remaining = granted.find_element("css selector", "td.remaining").text
    assert float(remaining) == pytest.approx(budget["epsilon_remaining"], rel=1e-2)

    model_id = wait_job(sqlite_server, story["analyst"], live_job["id"])["model_id"]
    browser.find_element("css selector", f"{row} button").click()
    wait_until(
        browser,
        f"document.getElementById('model-chart').dataset.model === '{model_id}'",
        "the model chart",
    )
    with sqlite_server.client(story["analyst"]) as client:
        model = client.get(f"/v1/models/{model_id}").json()
    bars = browser.find_elements("css selector", "#model-chart svg.coefficients rect")
    assert len(bars) == len(model["coefficients"]) + 1  # + the intercept
    privacy = browser.find_element("id", "model-privacy").text
    assert model["privacy"]["mechanism"] in privacy
    browser.save_screenshot(str(shots / "analyst.png"))
    urls = requested_urls(browser)
    assert sum(1 for u in urls if "/v1/jobs" in u) >= 1
    assert_same_origin(urls, sqlite_server)


def test_bad_key_is_refused_and_kept_nowhere(browser: Any, sqlite_server: LiveServer) -> None:
    browser.get(f"{sqlite_server.base_url}/ui")
    wait_until(browser, "document.getElementById('sign-in') !== null", "the sign-in form")
    browser.find_element("id", "api-key").send_keys("dpf_not-a-real-key")
    browser.find_element("css selector", "#sign-in button[type=submit]").click()
    wait_until(browser, "!document.getElementById('sign-in-error').hidden", "the error")
    assert browser.execute_script("return sessionStorage.getItem('dpfit.apiKey')") is None
    assert "not-a-real-key" not in browser.current_url
    assert browser.find_element("id", "dashboard").get_attribute("hidden") is not None


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_api_docs_render_offline(
    browser: Any, sqlite_server: LiveServer, page: str, shots: Path
) -> None:
    requested_urls(browser)
    browser.get(f"{sqlite_server.base_url}{page}")
    marker = ".swagger-ui .opblock" if page == "/docs" else "[data-section-id]"
    wait_until(browser, f"document.querySelector('{marker}') !== null", f"{page} rendered")
    browser.save_screenshot(str(shots / f"{page.strip('/')}.png"))
    assert_same_origin(requested_urls(browser), sqlite_server)


# --- a dashboard owners can act on (issue 26 item 5) -------------------------------------------

VIEWPORTS = (900, 1400)
BURST = 15

#: Everything on the page that must be visible and must fit, as a list of problems (empty: fine).
LAYOUT_PROBLEMS = r"""
const problems = [];
const W = window.innerWidth;
const box = (e) => e.getBoundingClientRect();
const shown = (e) => { const r = box(e); return r.width > 0 && r.height > 0; };
const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
  (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ').join('.') : '');
const overlap = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 &&
  a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
if (document.documentElement.scrollWidth > W + 1)
  problems.push(`the page is ${document.documentElement.scrollWidth}px wide in a ${W}px viewport`);
for (const sel of arguments[0]) {
  const found = [...document.querySelectorAll(sel)];
  if (!found.length) { problems.push(`${sel}: not on the page`); continue; }
  for (const e of found) {
    if (!shown(e)) problems.push(`${sel}: not visible`);
    const r = box(e);
    if (r.left < -0.5 || r.right > W + 0.5)
      problems.push(`${sel}: ${r.left}..${r.right} outside 0..${W}`);
  }
}
for (const t of document.querySelectorAll('table.grid')) {
  if (!shown(t)) continue;
  const holder = t.parentElement;
  if (t.scrollWidth > holder.clientWidth + 1 || box(t).right > box(holder).right + 1)
    problems.push(`${name(t)} is cut: ${t.scrollWidth}px in ${holder.clientWidth}px`);
  for (const cell of t.querySelectorAll('td, th')) {
    if (cell.scrollWidth > cell.clientWidth + 1)
      problems.push(`${name(t)}: a cell is cut: ${JSON.stringify(cell.textContent.slice(0, 40))}`);
  }
}
for (const card of document.querySelectorAll('.dataset-body, .model-layout')) {
  const [a, b] = card.children;
  if (a && b && shown(a) && shown(b) && overlap(box(a), box(b)))
    problems.push(`${name(card)}: ${name(a)} overlaps ${name(b)}`);
}
for (const svg of document.querySelectorAll('svg.burn-down')) {
  for (const cls of ['x-tick', 'y-tick']) {
    const labels = [...svg.querySelectorAll('text.' + cls)].map(box);
    for (let i = 1; i < labels.length; i += 1)
      if (overlap(labels[i - 1], labels[i])) problems.push(`burn-down ${cls} labels overlap`);
  }
}
return problems;
"""


def set_viewport(driver: Any, width: int, height: int = 1100) -> None:
    """The page's viewport exactly ``width`` CSS pixels wide (not the window's outer size)."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )


def layout_problems(driver: Any, must_show: list[str]) -> list[str]:
    problems: list[str] = driver.execute_script(LAYOUT_PROBLEMS, must_show)
    return problems


def screenshot(driver: Any, path: Path, width: int) -> None:
    """A screenshot of the viewport, checked to be that wide and not blank."""
    driver.save_screenshot(str(path))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(data[16:20], "big") == width  # the IHDR width
    assert len(data) > 10_000, f"{path.name} looks blank"


def fresh_copy() -> Path:
    """A fresh copy of the example data under COPIES (a data root of every live server)."""
    return COPIES / fresh_credit_copy()


@pytest.fixture(scope="module")
def burst(sqlite_server: LiveServer) -> dict[str, Any]:
    """An owner with three datasets: one with a burst of 15 charges in a few seconds, one with a
    label typo (registered with strict off), and one whose file changed after registration (its
    job fails, refunded). The analyst ran them all."""
    owner = sqlite_server.key("burst-olivia", "owner")
    analyst = sqlite_server.key("burst-ann", "analyst")
    with sqlite_server.client(owner) as client:
        body = credit_dataset(epsilon=20.0)
        body["name"] = "credit-burst"
        response = client.post("/v1/datasets", json=body)
        assert response.status_code == 201, response.text
        busy = response.json()["id"]
        typo = credit_dataset(epsilon=3.0)
        typo["name"] = "credit-typo"
        typo["label"]["positive"] = ">50k"  # the data says >50K
        typo["strict"] = False
        response = client.post("/v1/datasets", json=typo)
        assert response.status_code == 201, response.text
        broken = response.json()["id"]
        changed_path = fresh_copy()
        changing = credit_dataset(epsilon=3.0, uri=changed_path.name)
        changing["name"] = "credit-changed"
        response = client.post("/v1/datasets", json=changing)
        assert response.status_code == 201, response.text
        changed = response.json()["id"]
        for dataset_id in (busy, broken, changed):
            grants = f"/v1/datasets/{dataset_id}/grants"
            grant = client.post(grants, json={"principal": "burst-ann"})
            assert grant.status_code == 201, grant.text
    changed_path.write_text(changed_path.read_text() + "30,40,HS,public,<=50K,\n")
    with sqlite_server.client(analyst) as client:
        jobs = []
        for i in range(BURST):
            job = logistic_job(busy, epsilon=0.1 + 0.02 * i)
            response = client.post("/v1/jobs", json=job)
            assert response.status_code == 202, response.text
            jobs.append(response.json()["id"])
        response = client.post("/v1/jobs", json=logistic_job(changed, epsilon=0.5))
        assert response.status_code == 202, response.text
        failing = response.json()["id"]
    failed = wait_job(sqlite_server, analyst, failing)
    assert failed["status"] == "failed" and failed["refunded"], failed
    for job_id in jobs:
        wait_job(sqlite_server, analyst, job_id)
    return {
        "owner": owner,
        "analyst": analyst,
        "busy": busy,
        "broken": broken,
        "changed": changed,
        "failed": failed,
        "jobs": jobs,
    }


def card(dataset_id: str) -> str:
    return f"article.dataset[data-dataset='{dataset_id}']"


def nice(step: float) -> bool:
    """1, 2, 2.5 or 5 times a power of ten."""
    import math

    mantissa = step / 10 ** math.floor(math.log10(step))
    return any(abs(mantissa - m) < 1e-6 for m in (1, 2, 2.5, 5, 10))


def ledger_column(driver: Any, dataset_id: str, cls: str) -> list[float]:
    cells = driver.find_elements("css selector", f"{card(dataset_id)} table.ledger tbody td.{cls}")
    return [float(c.text.replace("−", "-").replace("+", "")) for c in cells]


@pytest.mark.parametrize("width", VIEWPORTS)
def test_owner_page_shows_validation_ledger_and_a_readable_burst(
    browser: Any, sqlite_server: LiveServer, burst: dict[str, Any], shots: Path, width: int
) -> None:
    set_viewport(browser, width)
    requested_urls(browser)
    sign_in(browser, sqlite_server, burst["owner"])
    assert browser.execute_script("return document.body.dataset.view") == "owner"
    assert browser.find_element("id", "who").text == "burst-olivia · owner view"
    busy = card(burst["busy"])
    wait_until(browser, f'document.querySelector("{busy} svg.burn-down path.spent")', "chart")

    # The validation report: loud for the label typo, calm for the clean data.
    typo = browser.find_element("css selector", f"{card(burst['broken'])} .validation")
    assert "bad" in typo.get_attribute("class").split()
    assert "outside the declared values" in typo.text and "of 4000 labels" in typo.text
    clean = browser.find_element("css selector", f"{busy} .validation")
    assert "ok" in clean.get_attribute("class").split() and "4000 rows" in clean.text

    # The ledger: per row the ε it added at δ_B, and the running total; they agree with the API.
    with sqlite_server.client(burst["owner"]) as client:
        budget = client.get(f"/v1/datasets/{burst['busy']}/budget").json()
        history = client.get(f"/v1/datasets/{burst['busy']}/budget/history").json()
    added = ledger_column(browser, burst["busy"], "added")
    running = ledger_column(browser, burst["busy"], "running")
    assert len(added) == len(running) == BURST
    assert running == pytest.approx([p["epsilon_spent"] for p in history["points"]], abs=1e-3)
    assert running[-1] == pytest.approx(budget["epsilon_spent"], abs=1e-3)
    assert sum(added) == pytest.approx(running[-1], abs=6e-4 * BURST)  # 3 decimals shown
    requested = sum(0.1 + 0.02 * i for i in range(BURST))
    assert requested > 2 * running[-1]  # what the old ε column summed to: not the spend
    # a refund row after the failed job, its ε added negative (nothing stays charged)
    changed_added = ledger_column(browser, burst["changed"], "added")
    assert len(changed_added) == 2 and changed_added[0] > 0
    assert changed_added[1] == pytest.approx(-changed_added[0], abs=1e-3)

    # The burn-down: one point per ledger row, spread by charge order (a burst of 15 jobs within
    # seconds is not one vertical line), round ticks, a tooltip per point.
    xs = browser.execute_script(
        f'return [...document.querySelectorAll("{busy} svg.burn-down circle.point")]'
        ".map((c) => c.getBoundingClientRect().x)"
    )
    assert len(xs) == BURST
    gaps = [b - a for a, b in zip(xs, xs[1:], strict=False)]
    assert min(gaps) > 15, gaps  # CSS px between consecutive points
    y_ticks = [
        float(t.text)
        for t in browser.find_elements("css selector", f"{busy} svg.burn-down text.y-tick")
    ]
    steps = {round(b - a, 9) for a, b in zip(y_ticks, y_ticks[1:], strict=False)}
    assert y_ticks[0] == 0 and len(steps) == 1 and nice(steps.pop()), y_ticks
    titles = browser.execute_script(
        f'return [...document.querySelectorAll("{busy} svg.burn-down g.mark")]'
        ".map((g) => g.querySelector('title').textContent)"
    )
    assert len(titles) == BURST
    for job_id, title in zip(burst["jobs"], titles, strict=True):
        assert f"job {job_id}" in title and "analyst burst-ann" in title and "ε added" in title

    must_show = [
        "#who",
        f"{busy} svg.burn-down",
        f"{busy} .facts",
        f"{busy} table.ledger",
        f"{card(burst['broken'])} .validation",
        f"{busy} table.grants",
    ]
    assert layout_problems(browser, must_show) == []
    screenshot(browser, shots / f"owner-{width}.png", width)
    assert_same_origin(requested_urls(browser), sqlite_server)


@pytest.mark.parametrize("width", VIEWPORTS)
def test_analyst_sees_names_failure_reasons_and_every_column(
    browser: Any, sqlite_server: LiveServer, burst: dict[str, Any], shots: Path, width: int
) -> None:
    set_viewport(browser, width)
    requested_urls(browser)
    sign_in(browser, sqlite_server, burst["analyst"])
    assert browser.execute_script("return document.body.dataset.view") == "analyst"
    assert browser.find_element("id", "who").text == "burst-ann · analyst view"
    failed = browser.find_element("css selector", f"tr[data-job='{burst['failed']['id']}']")
    assert failed.get_attribute("data-status") == "failed"
    reason = failed.find_element("css selector", "td.status .reason").text
    assert reason == burst["failed"]["error"] and "changed since it was registered" in reason
    dataset_cell = failed.find_element("css selector", "td.dataset-name").text
    assert "credit-changed" in dataset_cell and burst["changed"] in dataset_cell
    done = browser.find_element("css selector", f"tr[data-job='{burst['jobs'][-1]}']")
    assert "credit-burst" in done.find_element("css selector", "td.dataset-name").text
    wait_until(browser, "document.getElementById('model-chart').dataset.model", "the model chart")
    last_column = "#jobs-table thead th:last-child"
    must_show = [
        "#who",
        "#jobs-table",
        last_column,
        "#jobs-table td.model-id button",
        "#granted-table",
        "#model-chart svg.coefficients",
        "#model-privacy",
    ]
    assert layout_problems(browser, must_show) == []
    screenshot(browser, shots / f"analyst-{width}.png", width)
    assert_same_origin(requested_urls(browser), sqlite_server)


def test_admin_page_says_admin_and_shows_every_dataset(
    browser: Any, sqlite_server: LiveServer, burst: dict[str, Any], shots: Path
) -> None:
    admin = sqlite_server.key("admin", "admin")
    set_viewport(browser, 1400)
    sign_in(browser, sqlite_server, admin)
    assert browser.execute_script("return document.body.dataset.view") == "admin"
    assert browser.find_element("id", "who").text == "admin · admin view"
    assert browser.find_element("id", "owned-title").text == "All datasets"
    for dataset_id in (burst["busy"], burst["broken"], burst["changed"]):
        owner = browser.find_element("css selector", f"{card(dataset_id)} .facts").text
        assert "burst-olivia" in owner
    screenshot(browser, shots / "admin-1400.png", 1400)


def test_root_redirects_and_the_sign_in_card_says_where_keys_come_from(
    browser: Any, sqlite_server: LiveServer, shots: Path
) -> None:
    set_viewport(browser, 900)
    browser.get(f"{sqlite_server.base_url}/")
    wait_until(browser, "document.getElementById('sign-in') !== null", "the sign-in form")
    assert browser.current_url == f"{sqlite_server.base_url}/ui"
    text = browser.find_element("id", "key-source").text
    assert "dpfit keys create --role admin --name admin" in text and "docker exec" in text
    assert layout_problems(browser, ["#sign-in-view", "#key-source", "#api-key"]) == []
    screenshot(browser, shots / "sign-in-900.png", 900)


def test_the_layout_check_sees_what_it_is_for(browser: Any, sqlite_server: LiveServer) -> None:
    """At 900 px the old jobs table cut its last column; the check reports such a table, a
    page wider than the viewport, overlapping tick labels and a missing element."""
    set_viewport(browser, 900)
    browser.get(f"{sqlite_server.base_url}/ui")
    wait_until(browser, "document.getElementById('sign-in') !== null", "the sign-in form")
    assert layout_problems(browser, ["#sign-in-view"]) == []
    browser.execute_script(
        """
        const holder = document.createElement('div');
        holder.className = 'scroll';
        const table = document.createElement('table');
        table.className = 'grid';
        const row = table.insertRow();
        for (let i = 0; i < 9; i += 1) {
          const cell = row.insertCell();
          cell.textContent = 'mdl_0123456789abcdef0123';
          cell.style.whiteSpace = 'nowrap';
        }
        holder.append(table);
        document.querySelector('main').append(holder);
        const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
        svg.setAttribute('class', 'burn-down');
        svg.setAttribute('width', '200');
        svg.setAttribute('height', '50');
        for (const x of [10, 14]) {
          const t = document.createElementNS('http://www.w3.org/2000/svg', 'text');
          t.setAttribute('class', 'x-tick'); t.setAttribute('x', x); t.setAttribute('y', 20);
          t.textContent = '0.81'; svg.append(t);
        }
        document.querySelector('main').append(svg);
        const wide = document.createElement('div');
        wide.style.width = '1200px'; wide.style.height = '4px';
        document.querySelector('main').append(wide);
        """
    )
    problems = layout_problems(browser, ["#sign-in-view", "#no-such-element"])
    assert any("is cut" in p for p in problems), problems
    assert any("px wide in a 900px viewport" in p for p in problems), problems
    assert any("x-tick labels overlap" in p for p in problems), problems
    assert any("#no-such-element: not on the page" in p for p in problems), problems
