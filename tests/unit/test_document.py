"""Reports as sections: one document, rendered to Markdown and HTML with the same content."""

from __future__ import annotations

import math

import pandas as pd

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


def test_wide_tables_are_split_repeating_the_key() -> None:
    wide = pd.DataFrame({f"c{i}": [i, i + 1] for i in range(23)})
    wide.insert(0, "scenario", ["a", "b"])
    ps = doc.parts(doc.Table(wide))
    assert [len(p.columns) for p in ps] == [10, 10, 6]
    assert all(p.columns[0] == "scenario" for p in ps)
    assert sorted({c for p in ps for c in p.columns}) == sorted(wide.columns)
    md = doc.markdown_table(doc.Table(wide))
    assert md.count("| scenario |") == 3
    indexed = doc.parts(doc.Table(wide.set_index("scenario"), index=True))
    assert all(p.columns[0] == "scenario" for p in indexed)
    assert doc.html_table(doc.Table(wide)).count("<table") == 3
