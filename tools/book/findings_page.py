"""`python -m tools.book.findings_page`: write book/findings.md, the page "What holds for this checkpoint".

Every finding a chapter states (helpers.findings) is glued as `<name>`, `<name>_verdict` and `<name>_value`. The
stored notebooks were executed on the packaged checkpoint, so their glued outputs are its results: this page types
those in, and pastes the checkpoint that built the book through cross-page `{glue:text}` roles. `make book` runs
this before Jupyter Book; a test checks that the committed page is in step with the notebooks.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from myst_parser.mdit_to_docutils.base import default_slugify

from tools.book.toc import ROOT, toc_notebooks

PAGE = ROOT / "book" / "findings.md"
SUFFIX = "_verdict"
VERDICTS = ("holds", "does not hold")  # helpers.findings.VERDICTS; a glued verdict is one of these
HEADING = re.compile(r"^(#{1,6})\s+(.*)$", re.M)

INTRO = """# What holds for this checkpoint

A *finding* is a claim about trained weights: the [PAD] row is not zero, `bad` is a near neighbour of `good`.
Unlike an architectural fact, which the chapters assert, a finding holds for the checkpoint that was measured and
may not hold for another. Each chapter states its findings through `helpers.findings`, so its prose says what the
checkpoint that ran shows. This page lists them all: the verdict for **the checkpoint this book was built with**
({glue:text}`embedding_layer_at_a_glance.ipynb::ata_checkpoint:s`) beside the verdict stored for the packaged
checkpoint (sentence-transformers/all-MiniLM-L6-v2), with a link to the section that measures it.

To read the book on your own BERT, point `BERT_BOOK_CHECKPOINT` at a local directory holding `config.json`,
`model.safetensors` and `vocab.txt` and run `make book` (the README says more). A finding that does not hold for
your checkpoint is not an error: it is what your checkpoint's weights show.
"""


@dataclass(frozen=True)
class StoredFinding:
    """A finding as the stored notebook (the packaged checkpoint) shows it."""

    chapter: str
    section: str
    anchor: str
    name: str
    verdict: str
    value: str


def plain(markdown: str) -> str:
    """A heading's text without Markdown emphasis, code marks or glue roles."""
    return re.sub(r"\{[a-z:]+\}`[^`]*`|[`*_]", "", markdown).strip()


def anchor(heading: str) -> str:
    """The anchor MyST gives a heading (myst_heading_anchors): its slug, inline math left out as MyST does."""
    return default_slugify(re.sub(r"\$[^$]*\$", "", heading))


def glued_text(output: dict) -> tuple[str, str] | None:
    """(name, text) of a glue output, or None for any other output."""
    scrapbook = output.get("metadata", {}).get("scrapbook")
    if not scrapbook:
        return None
    raw = output["data"].get(scrapbook["mime_prefix"] + "text/plain", "")
    try:
        return scrapbook["name"], str(ast.literal_eval(raw))
    except (SyntaxError, ValueError):
        return scrapbook["name"], raw


def stored_findings(notebook: Path) -> list[StoredFinding]:
    """The findings a stored notebook glued, each with the section heading above the cell that stated it."""
    cells = json.loads(notebook.read_text())["cells"]
    section, found, glued = "", [], {}
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            headings = HEADING.findall(source)
            section = plain(headings[-1][1]) if headings else section
        for output in cell.get("outputs", []):
            if (pair := glued_text(output)) is None:
                continue
            glued[pair[0]] = pair[1]
            if pair[0].endswith(SUFFIX) and pair[1] in VERDICTS:
                found.append((pair[0][: -len(SUFFIX)], section))
    return [StoredFinding(notebook.stem, section, anchor(section), name, glued[name + SUFFIX],
                          glued.get(name + "_value", "")) for name, section in found]


def chapter_title(notebook: Path) -> str:
    """A notebook's `# Title`."""
    first = "".join(json.loads(notebook.read_text())["cells"][0]["source"])
    return plain(HEADING.search(first).group(2))


def table(notebook: Path, findings: list[StoredFinding]) -> str:
    """A chapter's findings as a Markdown table: section, this checkpoint, the packaged checkpoint."""
    rows = [f"## {chapter_title(notebook)}", "",
            "| section | this checkpoint | verdict | packaged checkpoint (stored) |", "|---|---|---|---|"]
    for item in findings:
        # The role's last ':' starts a format spec, so a cross-page key needs one of its own (':s').
        here = f"{{glue:text}}`{notebook.name}::{item.name}:s`"
        verdict = f"{{glue:text}}`{notebook.name}::{item.name}{SUFFIX}:s`"
        link = f"[{item.section}]({notebook.name}#{item.anchor})"
        rows.append(f"| {link} | {here} | {verdict} | {item.verdict} ({item.value}) |")
    return "\n".join(rows)


def page(notebooks: list[Path]) -> str:
    """The whole page: the introduction, then one table per chapter that states findings."""
    parts = [INTRO]
    counts = []
    for notebook in notebooks:
        if findings := stored_findings(notebook):
            parts.append(table(notebook, findings))
            counts.append(len(findings))
    parts.append(f"Findings in this book: {sum(counts)}, stated in {len(counts)} of its chapters.")
    return "\n\n".join(parts) + "\n"


def main() -> int:
    """Write the page when it differs from what the notebooks say (leaving its time alone otherwise)."""
    text = page([path for path in toc_notebooks() if path != PAGE])
    if not PAGE.exists() or PAGE.read_text() != text:
        PAGE.write_text(text)
        print(f"findings_page: wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
