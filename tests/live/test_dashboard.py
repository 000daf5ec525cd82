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
from tests.support.walkthrough import credit_dataset, logistic_job

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
