"""The HTML report opened offline in a real chromium: every section and every chart renders."""

from __future__ import annotations

from test_report_html import EXPECTED_CHARTS


def test_report_renders_offline_in_chromium(scenario_report, page, screenshot_dir):
    html, doc = scenario_report
    external: list[str] = []

    def block(route):
        if route.request.url.startswith("file:"):
            route.continue_()
        else:  # nothing may be fetched from anywhere at view time
            external.append(route.request.url)
            route.abort()

    page.route("**/*", block)
    page.context.set_offline(True)
    try:
        page.goto(html.as_uri())
        sections = page.eval_on_selector_all("section[data-section]", "els => els.map(e => e.id)")
        assert sections == doc["sections"]
        charts = page.eval_on_selector_all(
            "svg.ct-chart",
            """els => els.map(s => { const r = s.getBoundingClientRect();
                 const marks = Array.from(s.querySelectorAll('.ct-mark'));
                 const drawn = marks.filter(m => { const b = m.getBBox(); return b.width > 0 || b.height > 0; });
                 return {name: s.dataset.chart, w: r.width, h: r.height, marks: marks.length, drawn: drawn.length}; })""")
        assert {c["name"] for c in charts} == EXPECTED_CHARTS
        for c in charts:
            assert c["w"] > 300 and c["h"] > 60, c
            assert c["drawn"] >= 1 and c["drawn"] == c["marks"], c
        assert page.title().startswith("ClusterTwin report")
        page.screenshot(path=str(screenshot_dir / "report-full.png"), full_page=True)
        for sid in sections:
            page.locator(f"#{sid}").screenshot(path=str(screenshot_dir / f"report-{sid}.png"))
        assert external == []
    finally:
        page.context.set_offline(False)
