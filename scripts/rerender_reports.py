#!/usr/bin/env python3
"""Render committed reports again from their data folders and check that only the layout changed.

For each docs/results/<name>/data/: load the parquet tables into a temporary store, write the report
with the current code, and compare its report.md with the committed one: every table cell (section,
row, column, value; numbers as numbers, so 3.000 equals 3; tables split into parts or transposed are
put back together first) and the numbers of every text line outside the headline (per section, in
any order). With --write, report.md and report.html replace the committed ones; figures are copied
only where their bytes changed (the *-recorded.png kept from the original runs are left alone).

    PYTHONPATH=src .venv/bin/python scripts/rerender_reports.py [--write] [--changed TITLE] [docs/results/<name> ...]

--changed TITLE (repeatable): a section whose numbers are meant to change (an analysis that changed
on purpose, e.g. "Starvation diagnosis"); its differences are neither shown nor counted.

Exit status 1 when a report's numbers differ (nothing is written for it).
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
from pathlib import Path

from results_args import results_folders

from shufflelab import report
from shufflelab.results import Store

NUM = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
Table = tuple[str, list[str], list[list[str]], int]  # section, header, rows, index of the first row


def _value(v: str) -> float | str:
    try:
        return float(v)
    except ValueError:
        return v.strip()


def parse(md: str) -> tuple[list[Table], set[tuple[str, tuple[float, ...]]]]:
    """The report's tables and, per section, the numbers of each text line (the headline left out)."""
    tables: list[Table] = []
    lines: set[tuple[str, tuple[float, ...]]] = set()
    section, current = "", None
    for line in md.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            if current is None:
                current = (section, cells, [], 0)
                tables.append(current)
            elif not set(line) <= set("|-"):
                current[2].append(cells)
            continue
        current = None
        if line.startswith("#"):
            section = line.lstrip("#").strip()
        elif section != "Headline" and (nums := tuple(float(x) for x in NUM.findall(line))):
            lines.add((section, nums))
    return tables, lines


def untransposed(tables: list[Table], old: list[Table]) -> list[Table]:
    """Tables printed transposed (their first column holds an old table's column names) as rows again;
    a part of a transposed and split table continues the rows where the previous part ended."""
    headers: dict[str, list[set[str]]] = {}
    for section, header, _, _ in old:
        headers.setdefault(section, []).append(set(header))
    offsets: dict[tuple[str, tuple[str, ...]], int] = {}
    out: list[Table] = []
    for section, header, rows, start in tables:
        first, keys = [r[0] for r in rows], header[0].split(" / ")
        if not any(set(first) | set(keys) == h for h in headers.get(section, [])):
            out.append((section, header, rows, start))
            continue
        back = [name.split(" / ") + [r[j] for r in rows] for j, name in enumerate(header[1:], start=1)]
        ident = (section, tuple(first))
        out.append((section, keys + first, back, offsets.get(ident, 0)))
        offsets[ident] = offsets.get(ident, 0) + len(back)
    return out


def cells(tables: list[Table]) -> set[tuple[str, int, str, float | str]]:
    return {
        (section, i, col, _value(v))
        for section, header, rows, start in tables
        for i, row in enumerate(rows, start=start)
        for col, v in zip(header, row, strict=False)
    }


def differences(old_md: str, new_md: str, changed: tuple[str, ...] = ()) -> list[str]:
    """What differs, outside the sections whose title starts with one of ``changed``."""
    old_tables, old_lines = parse(old_md)
    new_tables, new_lines = parse(new_md)
    a, b = cells(old_tables), cells(untransposed(new_tables, old_tables))
    if changed:
        a, b = ({x for x in s if not x[0].startswith(changed)} for s in (a, b))
        old_lines, new_lines = ({x for x in s if not x[0].startswith(changed)} for s in (old_lines, new_lines))
    out = [f"only before: {x}" for x in sorted(a - b, key=str)] + [f"only now: {x}" for x in sorted(b - a, key=str)]
    out += [f"text only before: {x}" for x in sorted(old_lines - new_lines, key=str)]
    return out + [f"text only now: {x}" for x in sorted(new_lines - old_lines, key=str)]


def rerender(folder: Path, write: bool, changed: tuple[str, ...] = ()) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "store.duckdb"
        Store(db).import_parquet(folder / "data")
        paths = report.write(db, Path(tmp) / "out")
        new_md = paths.markdown.read_text()
        diff = differences((folder / "report.md").read_text(), new_md, changed)
        n_cells = len(cells(parse(new_md)[0]))
        print(f"{folder.name}: {'numbers unchanged' if not diff else f'{len(diff)} differences'} ({n_cells} cells)")
        for line in diff[:20]:
            print(f"  {line}")
        if diff or not write:
            return not diff
        shutil.copy(paths.markdown, folder / "report.md")
        shutil.copy(paths.html, folder / "report.html")
        for fig in paths.figures:
            dest = folder / "figures" / fig.name
            if not dest.exists() or dest.read_bytes() != fig.read_bytes():
                print(f"  figure {fig.name} changed")
                dest.parent.mkdir(exist_ok=True)
                shutil.copy(fig, dest)
    return True


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="rerender_reports.py", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--write", action="store_true", help="replace report.md/.html (and changed figures)")
    parser.add_argument(
        "--changed", action="append", default=[], metavar="TITLE",
        help="a section whose numbers are meant to change (its title's start); repeatable",
    )  # fmt: skip
    parser.add_argument("folders", nargs="*", type=Path, help="docs/results/<name> (default: every one with data)")
    args = parser.parse_args(argv)
    folders = args.folders or sorted(
        p.parent for p in Path("docs/results").glob("*/data") if (p / "runs.parquet").exists()
    )
    results_folders(parser, folders)
    ok = [rerender(f, args.write, tuple(args.changed)) for f in folders]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
