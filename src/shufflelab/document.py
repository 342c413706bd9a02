"""A report as data: sections with text, tables and figures, rendered once to Markdown and once to HTML.

Analyses return :class:`Section` objects; a report is a :class:`Document` made of them. Rendering
lives here only, so the Markdown and the HTML of a report cannot drift apart. Text is Markdown
(the analyses write ``**bold**`` and backquoted code); text from outside (an application's or a
file's name) goes in through :func:`md_text`, whose backslash escapes both renderings honour.
"""

from __future__ import annotations

import base64
import html
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd


@dataclass
class Table:
    df: pd.DataFrame
    caption: str = ""
    index: bool = False  # the frame's index is a column of the table (and the row's key)
    keys: int = 1  # how many leading columns name a row: repeated in each part of a split table


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


def _is_count(col: pd.Series) -> bool:
    """A float column whose values are all whole numbers holds counts (pandas makes a column of
    integers float as soon as one value is missing): printed without decimals."""
    if not pd.api.types.is_float_dtype(col.dtype):
        return False
    vals = col.dropna()
    return bool(len(vals)) and bool(((vals % 1) == 0).all()) and bool((vals.abs() < 2**53).all())


def column_text(col: pd.Series) -> list[str]:
    """A column's cells as text: counts as integers (see :func:`_is_count`), else :func:`cell`."""
    if _is_count(col):
        return [cell(v) if pd.isna(v) else str(int(v)) for v in col]
    return [cell(v) for v in col]


MAX_COLUMNS = 10
MAX_WIDTH = 120
"""A table fits the page with at most MAX_COLUMNS columns and MAX_WIDTH characters a row (each
column as wide as its longest cell or name, plus a separator). A wider table is transposed when it
has at most TRANSPOSE_ROWS rows, else (or if still too wide) split column-wise into parts that each
repeat the row's key columns and show at least MIN_PART other columns, however wide they are."""
TRANSPOSE_ROWS = 3
MIN_PART = 2


def _frame(t: Table) -> tuple[pd.DataFrame, int]:
    """The table as text cells (column names as text) and its number of key columns."""
    df = t.df.reset_index() if t.index else t.df
    n_keys = t.df.index.nlevels if t.index else t.keys
    text = pd.DataFrame({i: column_text(df.iloc[:, i]) for i in range(len(df.columns))})
    text.columns = [str(c) for c in df.columns]
    return text, max(1, min(n_keys, len(df.columns)))


def _widths(df: pd.DataFrame) -> list[int]:
    return [max([len(str(c)), *(len(v) for v in df.iloc[:, i])]) + 3 for i, c in enumerate(df.columns)]


def _too_wide(df: pd.DataFrame) -> bool:
    return len(df.columns) > MAX_COLUMNS or sum(_widths(df)) > MAX_WIDTH


def _transposed(df: pd.DataFrame, n_keys: int) -> pd.DataFrame:
    """One row per non-key column, one column per row (named by its key values)."""
    names = [" / ".join(row) for row in df.iloc[:, :n_keys].itertuples(index=False, name=None)]
    out = df.iloc[:, n_keys:].T.reset_index()
    out.columns = [" / ".join(df.columns[:n_keys]), *names]
    return out


def _split(df: pd.DataFrame, n_keys: int) -> list[pd.DataFrame]:
    widths = _widths(df)
    key_width = sum(widths[:n_keys])
    groups: list[list[int]] = [[]]
    used = key_width
    for i in range(n_keys, len(df.columns)):
        full = len(groups[-1]) >= MAX_COLUMNS - n_keys
        if groups[-1] and (full or (used + widths[i] > MAX_WIDTH and len(groups[-1]) >= MIN_PART)):
            groups.append([])
            used = key_width
        groups[-1].append(i)
        used += widths[i]
    return [df.iloc[:, [*range(n_keys), *g]] for g in groups]


def parts(t: Table) -> list[pd.DataFrame]:
    """The table as printed, as text cells: whole if it fits the page (MAX_COLUMNS, MAX_WIDTH), else
    transposed (at most TRANSPOSE_ROWS rows) and/or split column-wise, each part keeping the keys."""
    df, n_keys = _frame(t)
    if not _too_wide(df):
        return [df]
    if len(df) <= TRANSPOSE_ROWS:
        df, n_keys = _transposed(df, n_keys), 1
        if not _too_wide(df):
            return [df]
    return _split(df, n_keys)


_MD_SPECIAL = re.compile(r"([\\`*\[\]<>&~#])")
_MD_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")  # not between two letters or digits (a_b stays)
_MD_LINE_START = re.compile(r"^(\s*)(?:([-+>=])|(\d+)([.)]))")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")  # CommonMark: a backslash before ASCII punctuation


def signed(value: float, digits: int = 0) -> str:
    """``value`` with its sign at ``digits`` decimals ("+12", "-1.5"); one that rounds to zero has
    none ("0", never "-0" or "+0": the sign of a change too small to print says nothing)."""
    text = f"{value:+.{digits}f}"
    return text[1:] if math.isfinite(value) and float(text) == 0 else text


def md_text(text: str) -> str:
    """Text from outside (an application's, a file's or a stage's name) as Markdown that renders it
    literally: a backslash before every character that could start emphasis, code, a link, raw HTML
    or an entity (``_`` only where it is not inside a word, so file names stay readable), and before
    what would make a line a heading, list or quote; line breaks become
    spaces, and leading and trailing white space (an indented code block at a line's start) goes.
    (A table's ``|`` is escaped by the table.)"""
    flat = _MD_SPECIAL.sub(r"\\\1", text.replace("\r", " ").replace("\n", " ").strip())
    flat = _MD_UNDERSCORE.sub(r"\\_", flat)  # between letters or digits a "_" opens or closes nothing
    return _MD_LINE_START.sub(
        lambda m: m.group(1) + ("\\" + m.group(2) if m.group(2) else m.group(3) + "\\" + m.group(4)), flat, count=1
    )


def _unescape(text: str) -> str:
    """Markdown's backslash escapes undone (for the HTML, which escapes the characters its own way)."""
    return _ESCAPED.sub(r"\1", text)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _markdown_part(df: pd.DataFrame) -> str:
    out = ["| " + " | ".join(_md_escape(c) for c in df.columns) + " |", "|" + "---|" * len(df.columns)]
    for row in df.itertuples(index=False, name=None):
        out.append("| " + " | ".join(_md_escape(v) for v in row) + " |")
    return "\n".join(out)


def markdown_table(t: Table) -> str:
    return "\n\n".join(_markdown_part(df) for df in parts(t))


WRAP = 40
"""In the HTML a cell longer than this (a cause, a sentence) wraps; shorter ones (numbers, intervals) do not."""


def _html_cell(v: str) -> str:
    v = _unescape(v)
    return f"<td class='w'>{html.escape(v)}</td>" if len(v) > WRAP else f"<td>{html.escape(v)}</td>"


def _html_part(df: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    rows = ["<tr>" + "".join(_html_cell(v) for v in row) + "</tr>" for row in df.itertuples(index=False, name=None)]
    return f"<table class='t'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def html_table(t: Table) -> str:
    return "\n".join(_html_part(df) for df in parts(t))


_STRONG = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`]+)`")


def inline(text: str) -> str:
    """Text as HTML, escaped, with the Markdown the analyses write (``**bold**``, backquoted code) and
    the backslash escapes of :func:`md_text` (the escaped character, literally)."""
    held: list[str] = []

    def hold(m: re.Match[str]) -> str:
        held.append(m.group(1))
        return f"\ue000{len(held) - 1}\ue001"

    out = html.escape(_ESCAPED.sub(hold, text), quote=False)
    out = _CODE.sub(r"<code>\1</code>", _STRONG.sub(r"<strong>\1</strong>", out))
    return _HELD.sub(lambda m: html.escape(held[int(m.group(1))], quote=False), out)


_HELD = re.compile("\ue000(\\d+)\ue001")


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
    "table.t th{background:#f3f3f3;overflow-wrap:anywhere}"
    "table.t td:first-child,table.t th:first-child{text-align:left}table.t td+td{white-space:nowrap}"
    "table.t td.w{white-space:normal;text-align:left;min-width:16em}"
    "figure{margin:1.5em 0}img{max-width:100%}figcaption{font-size:13px;color:#555}"
    ".note{background:#fff8e1;padding:.6em 1em;border-radius:4px}"
    "code{background:#f3f3f3;padding:0 .2em;border-radius:3px}"
)


def _img(p: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(p.read_bytes()).decode()


def to_html(doc: Document) -> str:
    esc = html.escape
    h = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>shufflelab: {esc(_unescape(doc.title))}</title><style>{STYLE}</style></head><body>",
        f"<h1>{inline(doc.title)}</h1>",
    ]
    if doc.description:
        h.append(f"<p>{inline(doc.description)}</p>")
    if doc.headline:
        h += ["<h2>Headline</h2><ul>", *[f"<li>{inline(line)}</li>" for line in doc.headline], "</ul>"]
    for s in doc.sections:
        h.append(f"<h{s.level}>{inline(s.title)}</h{s.level}>")
        if s.note:
            h.append("<div class='note'>")
        h += [f"<p>{inline(p)}</p>" for p in s.paragraphs]
        if s.bullets:
            h += ["<ul>", *[f"<li>{inline(b)}</li>" for b in s.bullets], "</ul>"]
        if s.note:
            h.append("</div>")
        for t in s.tables:
            if t.caption:
                h.append(f"<p>{inline(t.caption)}</p>")
            h.append(html_table(t))
        for f in s.figures:
            h.append(
                f"<figure><img src='{_img(f.path)}' alt='{esc(_unescape(f.caption))}'>"
                f"<figcaption>{inline(f.caption)}</figcaption></figure>"
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
