"""Screenshot of the demo's report for the docs: ``docs/img/report.png``.

    perfcast demo --out /tmp/perfcast-demo --quiet          # writes /tmp/perfcast-demo/report.html
    python docs/img/make_report_screenshot.py /tmp/perfcast-demo/report.html

Debian's ``chromium`` (headless) under Debian's ``chromedriver`` (``bash infra/chromium.sh``),
driven by Selenium (a test dependency), with a viewport of exactly ``--width`` x ``--height``
CSS pixels at scale 1; the top of the page is captured. Exits non-zero when the page logs a
console error.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path


def screenshot(report: Path, out: Path, width: int = 1400, height: int = 2400) -> list[str]:
    """Write ``out`` (PNG) from ``report``; returns the page's console errors."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_path:
        raise SystemExit("chromium/chromedriver missing: bash infra/chromium.sh")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--hide-scrollbars", f"--window-size={width},{height}", "--lang=en-US"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    try:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        driver.get(report.resolve().as_uri())
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(driver.get_screenshot_as_png())
        return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    finally:
        driver.quit()


def main() -> int:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="the report's HTML file")
    parser.add_argument("--out", type=Path, default=here / "report.png")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=2400)
    args = parser.parse_args()
    errors = screenshot(args.report, args.out, args.width, args.height)
    print(f"{args.out}: {args.width}x{args.height}" + "".join(f"\nconsole error: {e}"
                                                             for e in errors))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
