#!/usr/bin/env python3
"""Recompute the "What-if check" section of committed reports from their parquet tables.

A committed report (docs/results/<name>/) keeps its tables as parquet but not its queue samples,
so regenerating the whole report would drop the backlog figures; this replaces only the what-if
section of report.md and report.html with one computed by the current shufflelab.whatif.

    .venv/bin/python scripts/refresh_whatif_check.py docs/results/cc-under-udp [...]
"""

from __future__ import annotations

import argparse
import html
import re
import sys
import tempfile
from pathlib import Path

from results_args import results_folders

from shufflelab import document, report, whatif
from shufflelab.results import Store

MD_HEAD = "## What-if check: predicted vs measured job time without the cross traffic"
HTML_HEAD = "<h2>What-if check: predicted vs measured without the cross traffic</h2>"


def refresh(folder: Path) -> bool:
    md_path, html_path = folder / "report.md", folder / "report.html"
    md, page = md_path.read_text(), html_path.read_text()
    if MD_HEAD not in md or HTML_HEAD not in page:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "results.duckdb")
        store.import_parquet(folder / "data")
        table = whatif.validate(store.path)
    t = document.Table(table)
    md_section = "\n".join([MD_HEAD, "", report.WHATIF_NOTE, "", document.markdown_table(t), ""])
    md = re.sub(re.escape(MD_HEAD) + r".*?(?=\n## |\Z)", lambda _: md_section, md, count=1, flags=re.S)
    html_section = "\n".join([HTML_HEAD, f"<p>{html.escape(report.WHATIF_NOTE)}</p>", document.html_table(t)])
    page = re.sub(re.escape(HTML_HEAD) + r".*?(?=\n<h2>)", lambda _: html_section, page, count=1, flags=re.S)
    md_path.write_text(md)
    html_path.write_text(page)
    return True


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="refresh_whatif_check.py", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, help="docs/results/<name> with data/")
    for f in results_folders(parser, parser.parse_args(argv).folders):
        print(f, "refreshed" if refresh(f) else "has no what-if check")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
