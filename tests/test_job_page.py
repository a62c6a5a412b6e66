"""The live job page in a real browser: Debian's headless Chromium driven by Playwright.

A job with a slow sink runs in a subprocess (``streamflow run --rest-port 0``); the page must
show the job graph, the backpressured source coloured as such, and a completed checkpoint, and
keep updating. The screenshot is kept as a test artifact (its path is printed).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from jobproc import job_process
from playwright.sync_api import expect, sync_playwright

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip


def test_job_page_shows_graph_backpressure_and_checkpoints(tmp_path: Path) -> None:
    with job_process("--checkpoint-dir", str(tmp_path / "ck")) as job, sync_playwright() as pw:
        url = job.url()
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, timeout=60_000)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 900})
            page.set_default_timeout(30_000)
            page.goto(url + "/")
            expect(page.locator("#job-name")).to_have_text("slow job")
            expect(page.locator("#job-state")).to_have_text("RUNNING")
            vertices = page.locator("svg#graph g.vertex")
            expect(vertices).to_have_count(4)
            expect(page.locator("svg#graph path[marker-end]")).to_have_count(3)  # the edges
            source = page.locator("svg#graph g.vertex", has_text="collection")
            expect(source).to_have_attribute("data-backpressure", "high")
            expect(source.locator("rect")).to_have_class("high")
            expect(page.locator("svg#graph g.vertex", has_text="slow sink")).to_have_attribute(
                "data-backpressure", "ok"
            )
            completed = page.locator("#checkpoints tr.checkpoint[data-status=COMPLETED]")
            expect(completed.first).to_be_visible()
            expect(page.locator("#checkpoint-counts")).to_contain_text("completed")
            # live: the records shown for the slow operator keep growing
            slow_row = page.locator("#operators tbody tr", has_text="slow sink").first
            expect(slow_row).not_to_have_text(slow_row.inner_text())  # polls until the page redraws
            expect(page.locator("#operators tbody")).to_contain_text("2023-11-14")  # event-time watermarks
            shot = tmp_path / "job-page.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"job page screenshot: {shot}")
            assert shot.stat().st_size > 10_000
        finally:
            browser.close()
