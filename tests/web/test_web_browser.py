"""`clustertwin ui` end to end in chromium: each page, a plan with its plot, a bad input with the CLI's
message, a sweep with progress, the results browser and the report download. Screenshots go to a temp
dir (CLUSTERTWIN_SCREENSHOTS to keep them)."""

from __future__ import annotations

PAGES = {"/": "Estimate one training step", "/cluster": "Cluster design", "/plan": "Best parallel layouts", "/compare": "Compare cluster designs",
         "/sweep": "Design-space sweep", "/results": "Results database"}


def test_each_page_loads(server, page, screenshot_dir):
    for path, title in PAGES.items():
        resp = page.goto(server["url"] + path)
        assert resp.status == 200
        assert page.locator("h1").inner_text() == title
        page.screenshot(path=str(screenshot_dir / f"ui{path.replace('/', '-') or '-home'}.png"), full_page=True)


def test_cluster_picture(server, page, screenshot_dir):
    page.goto(server["url"] + "/cluster")
    page.select_option("#f-system", "gb200-nvl72")
    page.fill("#f-domains", "8")
    page.click("#run")
    page.locator('#out svg[data-chart="topology"]').wait_for(timeout=30000)
    assert page.locator('#out svg[data-chart="topology"] .ct-mark').count() >= 3
    page.screenshot(path=str(screenshot_dir / "ui-cluster-result.png"), full_page=True)


def test_plan_shows_the_plot(server, page, screenshot_dir):
    page.goto(server["url"] + "/plan")
    page.fill("#f-gpus", "256")
    page.select_option("#f-model", "llama3-8b")
    page.click("#run")
    chart = page.locator('#out svg[data-chart="plans"]')
    chart.wait_for(timeout=30000)
    box = chart.bounding_box()
    assert box and box["width"] > 300
    assert page.locator('#out svg[data-chart="plans"] .ct-mark').count() == 5
    assert "Why the runner-up lost" in page.locator("#out").inner_text()
    page.screenshot(path=str(screenshot_dir / "ui-plan-result.png"), full_page=True)


def test_estimate_plot_and_bad_input_message(server, page, screenshot_dir):
    page.goto(server["url"] + "/")
    page.click("#run")
    page.locator('#out svg[data-chart="waterfall"]').wait_for(timeout=30000)
    assert page.locator('#out svg[data-chart="memory"] .ct-mark').count() >= 3
    page.fill("#f-tp", "3")
    page.click("#run")
    err = page.locator("#out .error")
    err.wait_for(timeout=30000)
    assert "--gpus 64 is not divisible by tp*pp*cp = 3*8*1 = 24" in err.inner_text()
    page.screenshot(path=str(screenshot_dir / "ui-estimate-error.png"), full_page=True)


def test_sweep_progress_results_and_report(server, page, screenshot_dir):
    page.goto(server["url"] + "/sweep")
    page.click("#run")
    page.locator('#out svg[data-chart="pareto-cost"]').wait_for(timeout=60000)
    page.screenshot(path=str(screenshot_dir / "ui-sweep-result.png"), full_page=True)
    page.goto(server["url"] + "/results")
    link = page.locator("#results tr", has_text="web-smoke").locator("a").first
    link.click()
    page.locator('svg[data-chart="pareto-cost"]').wait_for(timeout=30000)
    with page.expect_download() as dl:
        page.click("#dbreport")
    assert dl.value.suggested_filename.endswith(".html")
    page.screenshot(path=str(screenshot_dir / "ui-results.png"), full_page=True)


def test_report_button_runs_a_job_with_a_download(server, page):
    page.goto(server["url"] + "/")
    page.click("#report")
    page.locator("#report-link").wait_for(timeout=120000)
    with page.expect_download() as dl:
        page.click("#report-link")
    path = dl.value.path()
    text = open(path, encoding="utf-8").read()
    assert text.count('class="ct-chart"') >= 10 and "data-section=\"accuracy\"" in text
