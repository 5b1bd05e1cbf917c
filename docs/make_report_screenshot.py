"""The README's picture of the interactive report (docs/report.png), taken in headless Chromium.

    python docs/make_report_screenshot.py [--run DIR] [--out docs/report.png]

Without ``--run``, ``landscape demo --size 25`` is run into a temporary folder first. The
report is opened from its file URL with the page's network off (as the tests do, with
the DevTools-protocol driver of tests/_chromium.py; run from the repository root) and its
Landscapes section, showing the first interval's 3-D surface and contour, is captured.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import viz  # noqa: E402
from tests._chromium import Chromium  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="a run directory (default: a fresh demo run)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "report.png", help="the PNG to write")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = args.run
        if run is None:
            run = Path(tmp) / "demo"
            subprocess.run([sys.executable, "-m", "landscape", "demo", "--out", str(run), "--size", "25"],
                           check=True, cwd=ROOT)
        page = viz.report(run, Path(tmp) / "report.html")
        with Chromium(1400, 1000) as browser:
            browser.offline()
            browser.open(page.resolve().as_uri())
            browser.wait_until("document.body.dataset.reportReady === 'true'")
            browser.pump(2)
            errors = browser.errors()
            if errors:
                raise SystemExit(f"the page reported errors: {errors}")
            args.out.write_bytes(browser.screenshot("#landscapes"))
    print(args.out)


if __name__ == "__main__":
    main()
