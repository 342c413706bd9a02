"""The fleet page in a real browser: headless Chromium's screenshots of ``fleet.html`` to look at.

    .venv/bin/python benchmarks/fleet_browser.py OUT/fleet.html [--png fleet.png] [--height 6000]

Needs Debian's ``chromium`` (``apt-get install -y chromium``); not part of the project's setup, since
no test needs it. Writes a full-width (1280 px) screenshot of the page's top ``--height`` pixels and
prints the page's size and its images' rendered sizes (an image wider than the window, or one that
failed to load, is what makes a page unreadable). What was seen at 5 and 10,000 applications is in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("page", type=Path)
    ap.add_argument("--png", type=Path, default=Path("fleet.png"))
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=6000)
    a = ap.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("chromium is not installed (apt-get install -y chromium)")
    if not a.page.is_file():
        sys.exit(f"{a.page}: no such page")
    common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    subprocess.run(
        [*common, f"--window-size={a.width},{a.height}", f"--screenshot={a.png.resolve()}", a.page.resolve().as_uri()],
        check=True,
        capture_output=True,
    )
    dom = subprocess.run(
        [*common, "--dump-dom", a.page.resolve().as_uri()], check=True, capture_output=True, text=True
    ).stdout
    imgs = len(re.findall(r"<img\b", dom))
    rows = len(re.findall(r"<tr\b", dom))
    print(
        f"{a.page}: {a.page.stat().st_size / 1e3:.0f} kB, {imgs} images, {rows} table rows; "
        f"screenshot {a.png} ({a.png.stat().st_size / 1e3:.0f} kB, {a.width}x{a.height})"
    )


if __name__ == "__main__":
    main()
