"""Reports as sections: one document, rendered to Markdown and HTML with the same content."""

from __future__ import annotations

import html as htmllib
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from shufflelab import document as doc


def _doc() -> doc.Document:
    df = pd.DataFrame({"scenario": ["a|b", "c"], "n": [3, 5], "job_s": [1.23456, math.nan], "x": [None, "<y>"]})
    return doc.Document(
        "exp",
        "desc",
        ["found it"],
        [doc.Section("Per scenario", ["text"], ["one"], [doc.Table(df, "caption")]), doc.Section("Limits", note=True)],
    )


def test_cells_never_show_nan_and_counts_stay_integers() -> None:
    assert doc.cell(math.nan) == "–"
    assert doc.cell(None) == "–"
    assert doc.cell(pd.NA) == "–"
    assert doc.cell(3) == "3"
    assert doc.cell(1.23456) == "1.235"


def test_markdown_and_html_carry_the_same_sections_and_cells() -> None:
    d = _doc()
    md, h = doc.to_markdown(d), doc.to_html(d)
    assert "nan" not in md and "nan" not in h
    for text in ("## Headline", "- found it", "## Per scenario", "## Limits", "a\\|b", "| 3 |", "1.235"):
        assert text in md
    for text in ("<h2>Per scenario</h2>", "<li>found it</li>", "a|b", "<td>3</td>", "&lt;y&gt;", "class='note'"):
        assert text in h
    assert md.index("Headline") < md.index("Per scenario") < md.index("Limits")


def test_wide_tables_are_split_repeating_the_key_columns() -> None:
    wide = pd.DataFrame({f"c{i}": range(i, i + 5) for i in range(22)})
    wide.insert(0, "case", list("abcde"))
    wide.insert(0, "workload", ["w"] * 5)
    ps = doc.parts(doc.Table(wide, keys=2))
    assert [len(p.columns) for p in ps] == [10, 10, 8]  # 22 columns, 8 a part next to the 2 keys
    assert all(list(p.columns[:2]) == ["workload", "case"] for p in ps)
    assert sorted({c for p in ps for c in p.columns}) == sorted(wide.columns)
    md = doc.markdown_table(doc.Table(wide, keys=2))
    assert md.count("| workload | case |") == 3
    indexed = doc.parts(doc.Table(wide.set_index(["workload", "case"]), index=True))
    assert all(list(p.columns[:2]) == ["workload", "case"] for p in indexed)
    assert doc.html_table(doc.Table(wide)).count("<table") == 3  # one key column: 9 more per part


def test_wide_tables_with_few_rows_are_transposed() -> None:
    wide = pd.DataFrame({f"c{i}": [i, i + 1] for i in range(12)})
    wide.insert(0, "scenario", ["a", "b"])
    (p,) = doc.parts(doc.Table(wide))
    assert list(p.columns) == ["scenario", "a", "b"]
    assert p.iloc[3].tolist() == ["c3", "3", "4"]
    assert len(p) == 12


def test_float_columns_holding_counts_print_as_integers() -> None:
    df = pd.DataFrame({"n": [3.0, math.nan, 10.0], "ratio": [1.0, 2.5, math.nan], "mean": [2.0, 2.0, 4.0]})
    (p,) = doc.parts(doc.Table(df))
    assert p["n"].tolist() == ["3", "–", "10"]  # a count column made float by a missing value
    assert p["ratio"].tolist() == ["1.000", "2.500", "–"]
    assert p["mean"].tolist() == ["2", "2", "4"]  # whole numbers throughout: no decimals to show


def test_inline_markdown_becomes_html_and_is_escaped() -> None:
    assert doc.inline("**a<b** vs `shufflelab diagnose` & c") == (
        "<strong>a&lt;b</strong> vs <code>shufflelab diagnose</code> &amp; c"
    )


class _Checker(HTMLParser):
    """Every element closed in order (void elements excepted): the page is well-formed."""

    VOID = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()


def well_formed(page: str) -> list[str]:
    """The page's start tags, after checking that every element is closed in order."""
    c = _Checker()
    c.feed(page)
    c.close()
    assert not c.stack, f"unclosed: {c.stack}"
    return c.tags


def test_html_is_well_formed(tmp_path: Path) -> None:
    png = tmp_path / "f.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n")
    d = _doc()
    d.sections.append(doc.Section("**Figures** `x`", ["a **b** c"], figures=[doc.Figure(png, "cap <1>")]))
    wide = pd.DataFrame({f"c{i}": range(5) for i in range(25)})
    d.sections[0].tables.append(doc.Table(wide))
    tags = well_formed(doc.to_html(d))
    assert tags.count("table") == 1 + 3 and "strong" in tags and "code" in tags and "img" in tags


def test_tables_wider_than_the_page_in_characters_are_split() -> None:
    long = pd.DataFrame({f"c{i}": [f"{'x' * 40}{r}" for r in range(5)] for i in range(7)})
    long.insert(0, "scenario", list("abcde"))
    ps = doc.parts(doc.Table(long))
    assert [list(p.columns)[1:] for p in ps] == [["c0", "c1"], ["c2", "c3"], ["c4", "c5"], ["c6"]]
    assert all(p.columns[0] == "scenario" for p in ps)
    wider = long.assign(c0=long["c0"] * 3)  # 2 columns a part even when they alone are wider than the page
    assert [list(p.columns)[1:] for p in doc.parts(doc.Table(wider))][0] == ["c0", "c1"]
    assert len(doc.parts(doc.Table(long.iloc[:, :3]))) == 1  # 2 x 43 characters + the key: it fits


def test_only_long_cells_wrap_in_html() -> None:
    t = doc.html_table(doc.Table(pd.DataFrame({"run": ["r1"], "cause": ["deadline: " + "served 0/8; " * 5]})))
    assert "<td>r1</td>" in t and "<td class='w'>deadline" in t


# -- text from outside is shown, not rendered (issue 31, item 3) ---------------------------------------

_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
_HOSTILE = st.text(st.sampled_from(list("ab 1.-+#>=*_`[]()<>!&|~\\$\"':;/{}\n")) | st.characters(codec="utf-8"))


def _shown(text: str) -> str:
    """What a reader should see: the text itself, whitespace runs (and line breaks) as one space."""
    return " ".join(text.split())


@settings(max_examples=300, deadline=None)
@given(name=_HOSTILE)
def test_outside_text_renders_literally_in_markdown_and_html(name: str) -> None:
    name = name.replace("\x00", "")  # (CommonMark replaces NUL; not a name anyone has)
    escaped = doc.md_text(name)
    for where in (f"## {escaped}", f"- {escaped}: more", escaped):
        html_out = _MD.render(where)
        inner = re.sub(r"^<(h2|ul>\n<li|p)>|</(h2|li>\n</ul|p)>\n$", "", html_out)
        assert "<" not in inner, (name, where, html_out)  # no tag, link, emphasis or list made of it
        assert _shown(htmllib.unescape(inner).removesuffix(": more")) == _shown(name), (name, where, html_out)
    rendered = doc.inline(escaped)
    assert "<" not in rendered and _shown(htmllib.unescape(rendered)) == _shown(name)


def test_an_escaped_name_in_a_table_reads_the_same_in_markdown_and_html() -> None:
    name = "<img src=x onerror=alert(1)> **x** [l](http://e) a|b"
    d = doc.Document("t", sections=[doc.Section("s", tables=[doc.Table(pd.DataFrame({"app": [doc.md_text(name)]}))])])
    md_html = _MD.render(doc.to_markdown(d))
    assert "<img" not in md_html and "<strong>" not in md_html and "<a " not in md_html
    assert htmllib.escape(name, quote=False) in doc.to_html(d)  # the HTML cell: the name, escaped once
