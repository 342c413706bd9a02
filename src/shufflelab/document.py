"""A report as data: sections with text, tables and figures, rendered once to Markdown and once to HTML.

Analyses return :class:`Section` objects; a report is a :class:`Document` made of them. Rendering
lives here only, so the Markdown and the HTML of a report cannot drift apart.
"""

from __future__ import annotations

import base64
import html
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd


@dataclass
class Table:
    df: pd.DataFrame
    caption: str = ""
    index: bool = False  # the frame's index is a column of the table


@dataclass
class Figure:
    path: Path
    caption: str


@dataclass
class Section:
    title: str
    paragraphs: list[str] = field(default_factory=list)
    bullets: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    note: bool = False  # rendered as a highlighted box (limits, caveats)
    level: int = 2


@dataclass
class Document:
    title: str
    description: str = ""
    headline: list[str] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)

    def figures(self) -> list[Figure]:
        return [f for s in self.sections for f in s.figures]


def cell(value: Any, digits: int = 3) -> str:
    """One table cell as text: missing values as "–", integral counts without decimals."""
    if value is None:
        return "–"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return f"{value:.{digits}f}"
    try:
        if pd.isna(value):
            return "–"
    except (TypeError, ValueError):
        pass
    return str(value)


MAX_COLUMNS = 10
"""A table wider than this is split into parts that fit the page, each repeating the key columns."""


def _frame(t: Table) -> pd.DataFrame:
    return t.df.reset_index() if t.index else t.df


def parts(t: Table) -> list[pd.DataFrame]:
    """The table as printed: whole, or split column-wise into parts of at most MAX_COLUMNS columns,
    each starting with the row's key (the index columns, else the first column)."""
    df = _frame(t)
    if len(df.columns) <= MAX_COLUMNS:
        return [df]
    n_keys = max(1, t.df.index.nlevels if t.index else 1)
    keys, rest = list(df.columns[:n_keys]), list(df.columns[n_keys:])
    width = max(1, MAX_COLUMNS - n_keys)
    return [df[keys + rest[i : i + width]] for i in range(0, len(rest), width)]


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _markdown_part(df: pd.DataFrame) -> str:
    cols = [_md_escape(str(c)) for c in df.columns]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False, name=None):
        out.append("| " + " | ".join(_md_escape(cell(v)) for v in row) + " |")
    return "\n".join(out)


def markdown_table(t: Table) -> str:
    return "\n\n".join(_markdown_part(df) for df in parts(t))


def _html_part(df: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    rows = [
        "<tr>" + "".join(f"<td>{html.escape(cell(v))}</td>" for v in row) + "</tr>"
        for row in df.itertuples(index=False, name=None)
    ]
    return f"<table class='t'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def html_table(t: Table) -> str:
    return "\n".join(_html_part(df) for df in parts(t))


def to_markdown(doc: Document, figure_dir: str = "figures") -> str:
    md = [f"# {doc.title}", ""]
    if doc.description:
        md += [doc.description, ""]
    if doc.headline:
        md += ["## Headline", ""] + [f"- {line}" for line in doc.headline] + [""]
    for s in doc.sections:
        md += ["#" * s.level + f" {s.title}", ""]
        for p in s.paragraphs:
            md += [p, ""]
        if s.bullets:
            md += [f"- {b}" for b in s.bullets] + [""]
        for t in s.tables:
            if t.caption:
                md += [t.caption, ""]
            md += [markdown_table(t), ""]
        for f in s.figures:
            md += [f"![{f.caption}]({figure_dir}/{f.path.name})", "", f"*{f.caption}*", ""]
    return "\n".join(md).rstrip("\n") + "\n"


STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;color:#222;padding:0 1em}"
    "table.t{border-collapse:collapse;font-size:13px;margin:1em 0;display:block;overflow-x:auto}"
    "table.t td,table.t th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:right}"
    "table.t th{background:#f3f3f3}figure{margin:1.5em 0}img{max-width:100%}"
    "figcaption{font-size:13px;color:#555}.note{background:#fff8e1;padding:.6em 1em;border-radius:4px}"
)


def _img(p: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(p.read_bytes()).decode()


def to_html(doc: Document) -> str:
    esc = html.escape
    h = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>shufflelab: {esc(doc.title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{esc(doc.title)}</h1>",
    ]
    if doc.description:
        h.append(f"<p>{esc(doc.description)}</p>")
    if doc.headline:
        h += ["<h2>Headline</h2><ul>", *[f"<li>{esc(line)}</li>" for line in doc.headline], "</ul>"]
    for s in doc.sections:
        h.append(f"<h{s.level}>{esc(s.title)}</h{s.level}>")
        if s.note:
            h.append("<div class='note'>")
        h += [f"<p>{esc(p)}</p>" for p in s.paragraphs]
        if s.bullets:
            h += ["<ul>", *[f"<li>{esc(b)}</li>" for b in s.bullets], "</ul>"]
        if s.note:
            h.append("</div>")
        for t in s.tables:
            if t.caption:
                h.append(f"<p>{esc(t.caption)}</p>")
            h.append(html_table(t))
        for f in s.figures:
            h.append(
                f"<figure><img src='{_img(f.path)}' alt='{esc(f.caption)}'>"
                f"<figcaption>{esc(f.caption)}</figcaption></figure>"
            )
    h.append("</body></html>")
    return "\n".join(h)


def write(doc: Document, out: Path) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` (figures already in ``out/figures``)."""
    out.mkdir(parents=True, exist_ok=True)
    md_path, html_path = out / "report.md", out / "report.html"
    md_path.write_text(to_markdown(doc))
    html_path.write_text(to_html(doc))
    return html_path, md_path
