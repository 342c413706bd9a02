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
