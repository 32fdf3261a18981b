"""The documentation's screenshots of the experiment page, taken in Debian's Chromium from
the 192-trial digits sweep that ``bench/dashboard_page.py`` measures (trained here by
``dnnframe run``, served by this checkout's dashboard):

    python bench/screenshots.py            # writes docs/screenshot.png, docs/dashboard-analysis.png

``docs/screenshot.png`` (the README's and the site's front page) is the page's top at
1400 px wide; ``docs/dashboard-analysis.png`` its analysis charts, from the axes chooser's
chart to the slices and the parallel coordinates (grouped curves, importance, the contour,
best so far, time per trial, the rank plot and the distribution between them).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from dashboard_page import ARGS, CHROMIUM, REPO, make_store, serve

WIDTH, HEIGHT = 1400, 1000
# the page marks its body once every chart is drawn (plotly's and the parallel coordinates')
READY = (
    "() => document.querySelectorAll('#trials tbody tr').length > 0 && "
    "document.body.dataset.charts === 'drawn'"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20, help="epochs each trial trains")
    parser.add_argument("--out", type=Path, default=REPO / "docs", help="where the PNGs go")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        url, experiment_id = make_store(tmp, args.epochs)
        server, base = serve(REPO, url, tmp)
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
                page.goto(f"{base}/experiments/{experiment_id}")
                page.wait_for_function(READY, timeout=120_000)
                page.wait_for_timeout(500)  # plotly's transitions settle
                page.screenshot(path=str(args.out / "screenshot.png"))
                first = page.locator(".chart").nth(0).bounding_box()
                last = page.locator("#chart-parallel").bounding_box()
                if first is None or last is None:
                    raise SystemExit("the page drew no chart")
                top = max(0.0, first["y"] - 40)
                page.screenshot(
                    path=str(args.out / "dashboard-analysis.png"),
                    full_page=True,
                    clip={
                        "x": 0,
                        "y": top,
                        "width": WIDTH,
                        "height": last["y"] + last["height"] + 20 - top,
                    },
                )
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    for name in ("screenshot.png", "dashboard-analysis.png"):
        print(args.out / name)


if __name__ == "__main__":
    main()
