"""What a reader who runs a chapter in Jupyter or Colab sees: every number the prose cites, every finding.

The book shows glued values through `{glue:text}` roles; a plain notebook front-end shows none of them, only the
cells' own outputs. So each glued value the prose cites, and each finding's sentence, must also appear in some
visible output (a print, a displayed table, the line the finding prints). The static tests read the executed
notebooks stored in book/; one chapter's fresh kernel run (no Jupyter Book) is checked the same way: the book
cache's run of the same code in the same environment where there is one (make book, or nbval storing into it), else
plain nbclient now.
"""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from tools.book.reading_order import ROLE
from tools.book.toc import toc_notebooks
from tools.environment import ROOT
from tools.testing.pytest_nbval_replay import cached_run, environment_unchanged

BOOK = ROOT / "book"
RECORD = "application/papermill.record/"
FINDING = re.compile(r"""\bfinding\(\s*["'](\w+)["']""")
CHAPTERS = [path.stem for path in toc_notebooks()]  # every chapter of the book
EXECUTED = "embedding_layer_at_a_glance"  # the one chapter whose fresh run is checked (nbclient: ~10 CPU s)


def _flat(text) -> str:
    return " ".join(("".join(text) if isinstance(text, list) else str(text)).split())


def _visible(cells) -> str:
    """Everything a front-end renders: streams and text/* outputs, glue records excluded; whitespace collapsed."""
    texts = []
    for cell in cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                texts.append(_flat(output.get("text", "")))
            for mime, value in output.get("data", {}).items():
                if mime.startswith("text/") and not mime.startswith(RECORD):
                    texts.append(_flat(value))
    return "\n".join(texts)


def _records(cells) -> dict[str, str]:
    """Glued values by name, as their text records or displayed text (quotes of a repr'd str removed)."""
    records = {}
    for cell in cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            data = output.get("data", {})
            # glue(..., display=False) stores a record; glue(...) with display on shows the value itself
            record = data.get(RECORD + "text/plain") or data.get(RECORD + "text/markdown") or data.get("text/plain")
            if name and record is not None:
                records[name] = _flat(record).strip("'\"")
    return records


def _missing(notebook) -> list[str]:
    """Cited glue keys and findings whose text no visible output shows."""
    cells = notebook["cells"]
    visible, records = _visible(cells), _records(cells)
    cited = {m.group(1).strip() for c in cells if c["cell_type"] == "markdown"
             for m in ROLE.finditer("".join(c["source"]))}
    findings = {m.group(1) for c in cells if c["cell_type"] == "code" for m in FINDING.finditer("".join(c["source"]))}
    problems = [f"{key}: cited but never glued" for key in sorted(cited - set(records))]
    problems += [f"{key} = {records[key]!r}: not in any visible output"
                 for key in sorted((cited | findings) & set(records)) if records[key] not in visible]
    problems += [f"finding {name}: never glued" for name in sorted(findings - set(records))]
    return problems


def test_the_checks_see_a_hidden_number():
    """Control: a value glued with display=False and printed nowhere is reported; printed, it is not."""
    glued = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "k"}},
             "data": {RECORD + "text/plain": "'0.123'"}}
    prose = {"cell_type": "markdown", "source": "value {glue:text}`k`", "metadata": {}}
    hidden = {"cells": [prose, {"cell_type": "code", "source": "", "outputs": [glued], "metadata": {}}]}
    assert _missing(hidden) == ["k = '0.123': not in any visible output"]
    printed = {"output_type": "stream", "name": "stdout", "text": "value 0.123\n"}
    shown = {"cells": [prose, {"cell_type": "code", "source": "", "outputs": [glued, printed], "metadata": {}}]}
    assert _missing(shown) == []


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_stored_outputs_show_every_cited_number_and_finding(chapter):
    notebook = json.loads((BOOK / f"{chapter}.ipynb").read_text())
    assert _missing(notebook) == []


def fresh_run(path):
    """A kernel run of `path` without Jupyter Book: the book cache's run when it is of this code in this environment
    (what nbval's replay trusts: make book's nbclient run, or nbval's run stored as nbclient stores it), else nbclient
    now. Never the outputs stored in book/."""
    cache = ROOT / "_build" / ".jupyter_cache"
    if environment_unchanged(cache) and (executed := cached_run(cache, path)) is not None:
        print(f"{path.name}: the book cache's run of this code in this environment")
        return executed
    print(f"{path.name}: run now with nbclient (the cache holds no run of this code in this environment)")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = []  # nothing stored may count
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    return notebook


def test_a_plain_nbclient_run_shows_every_cited_number_and_finding():
    assert _missing(fresh_run(BOOK / f"{EXECUTED}.ipynb")) == []
