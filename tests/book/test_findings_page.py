"""tools/book/findings_page.py: the page lists every finding the stored notebooks state, linked to its section."""

from __future__ import annotations

import json

import nbformat
from nbclient import NotebookClient

from tools.book import findings_page
from tools.book.toc import ROOT, toc_notebooks

CELLS = [
    ("markdown", "# A chapter"),
    ("markdown", "## The `[PAD]` row, measured\n\nText."),
    ("code", "from helpers import finding\nfinding('pad_row_nonzero', True, 0.7712, claim='norm {value}', "
             "contrary='zero')"),
    ("markdown", "## Another *section*, before $\\gamma$"),
    ("code", "finding('bad_near_good', False, 'worse', claim='near', contrary='far: {value}')"),
]


def executed_fixture(tmp_path):
    """A two-finding notebook run by nbclient, as the book's executor runs a chapter."""
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(src) if kind == "markdown" else nbformat.v4.new_code_cell(src)
        for kind, src in CELLS])
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    path = tmp_path / "chapter.ipynb"
    nbformat.write(notebook, path)
    return path


def test_findings_are_read_with_their_section_and_stored_verdict(tmp_path):
    path = executed_fixture(tmp_path)
    found = findings_page.stored_findings(path)
    assert [(f.name, f.section, f.anchor, f.verdict, f.value) for f in found] == [
        ("pad_row_nonzero", "The [PAD] row, measured", "the-pad-row-measured", "holds", "0.77"),
        ("bad_near_good", "Another section, before $\\gamma$", "another-section-before-", "does not hold", "worse"),
    ]
    table = findings_page.table(path, found)
    assert "[The [PAD] row, measured](chapter.ipynb#the-pad-row-measured)" in table
    assert "{glue:text}`chapter.ipynb::bad_near_good_verdict:s`" in table and "does not hold (worse)" in table


def test_the_committed_page_is_in_step_with_the_notebooks():
    expected = findings_page.page([path for path in toc_notebooks() if path != findings_page.PAGE])
    assert findings_page.PAGE.read_text() == expected, "run `python -m tools.book.findings_page`"
    assert "book/findings" in (ROOT / "_toc.yml").read_text()


def test_no_notebook_glues_a_key_twice():
    """A finding named like an earlier glue would shadow it (myst-nb warns, and -W fails the build)."""
    for path in toc_notebooks():
        names = [glued[0] for cell in json.loads(path.read_text())["cells"] for output in cell.get("outputs", [])
                 if (glued := findings_page.glued_text(output))]
        assert len(names) == len(set(names)), (path.name, sorted({n for n in names if names.count(n) > 1}))
