"""Nothing used before it is taught: every glossary term a chapter uses is taught in that chapter or an earlier one.

Each entry of book/glossary.md ends with the line `  Taught in {doc}`<chapter>`.`. A chapter *uses* a term when its
markdown cells mention it, linked ({term}`...`) or not: the term as a whole word (a plural "s"/"es" allowed),
case-sensitive when the term has a capital letter (LayerNorm, WordPiece), any case otherwise; fenced code blocks
and display math are not read. Chapters are the notebooks of _toc.yml, in its order; the root page (the intro)
comes first and may teach a term too. ALLOWED lists the few mentions that cannot wait, each with its reason.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tools.environment import ROOT

TAUGHT = re.compile(r"^  Taught in \{doc\}`([\w-]+)`\.$")
ROLE = re.compile(r"\{term\}`(?:[^`<]*<([^>`]+)>|([^`]+))`")

# (chapter, term): a mention before the teaching chapter, kept on purpose.
ALLOWED = {
    # The glance chapter names the checkpoint's vocabulary ("bert-base-uncased's WordPiece vocabulary") to say
    # what the model is; the tokenizer itself is the next chapter's subject.
    ("embedding_layer_at_a_glance", "WordPiece"),
}


def toc_order(root: Path = ROOT) -> list[str]:
    """The page stems of _toc.yml in reading order, the root page first."""
    text = (root / "_toc.yml").read_text()
    root_page = re.search(r"^root:\s*(\S+)", text, re.M).group(1)
    return [Path(p).name for p in [root_page, *re.findall(r"file:\s*(\S+)", text)]]


def glossary_entries(text: str) -> dict[str, list[str]]:
    """{term: its definition lines} from the {glossary} block of a glossary page."""
    block = text.split("```{glossary}", 1)[1].split("```", 1)[0]
    entries: dict[str, list[str]] = {}
    term = None
    for line in block.splitlines():
        if line.strip() and not line.startswith(" "):
            term = line.strip()
            entries[term] = []
        elif term is not None and line.strip():
            entries[term].append(line)
    return entries


def taught_in(entries: dict[str, list[str]]) -> dict[str, str]:
    """{term: the chapter stem its last line names}; a term without that line maps to ''."""
    return {term: (m.group(1) if lines and (m := TAUGHT.match(lines[-1])) else "") for term, lines in entries.items()}


def prose(text: str) -> str:
    """Markdown without fenced code blocks and display math."""
    text = re.sub(r"(`{3,}|~{3,})[^\n]*\n.*?\n\1", " ", text, flags=re.S)
    text = re.sub(r"^```(?!\{).*?^```", " ", text, flags=re.S | re.M)
    return re.sub(r"\$\$.*?\$\$", " ", text, flags=re.S)


def mentions(text: str, term: str) -> bool:
    """Whether prose mentions term as a whole word (plural allowed); case-sensitive for terms with a capital."""
    flags = 0 if any(ch.isupper() for ch in term) else re.IGNORECASE
    return re.search(r"(?<![\w-])" + re.escape(term) + r"(?:s|es)?(?![\w-])", text, flags) is not None


def uses(text: str, terms) -> set[str]:
    """The glossary terms a page's markdown uses: {term} roles and plain mentions."""
    text = prose(text)
    linked = {(a or b).strip() for a, b in ROLE.findall(text)}
    return {t for t in terms if t in linked or mentions(text, t)}


def page_markdown(stem: str, root: Path = ROOT) -> str | None:
    """A page's markdown: a notebook's markdown cells, or a .md page's text; None if neither exists."""
    notebook, page = root / "book" / f"{stem}.ipynb", root / "book" / f"{stem}.md"
    if notebook.exists():
        cells = json.loads(notebook.read_text())["cells"]
        return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return page.read_text() if page.exists() else None


def early_uses(order: list[str], taught: dict[str, str], pages: dict[str, str]) -> list[str]:
    """'chapter uses term, taught in later' for every use of a term before its teaching page (ALLOWED aside)."""
    rank = {stem: i for i, stem in enumerate(order)}
    problems = []
    for stem, text in pages.items():
        for term in sorted(uses(text, taught)):
            if (stem, term) not in ALLOWED and rank[stem] < rank[taught[term]]:
                problems.append(f"{stem} uses {term!r}, taught later in {taught[term]}")
    return problems


@pytest.fixture(scope="module")
def glossary() -> dict[str, list[str]]:
    return glossary_entries((ROOT / "book" / "glossary.md").read_text())


def chapters() -> dict[str, str]:
    """{stem: markdown} of the notebook pages in _toc.yml."""
    return {stem: page_markdown(stem) for stem in toc_order() if (ROOT / "book" / f"{stem}.ipynb").exists()}


def test_every_entry_names_the_chapter_that_teaches_it(glossary):
    order = toc_order()
    for term, chapter in taught_in(glossary).items():
        assert chapter, f"glossary entry {term!r} must end with the line '  Taught in {{doc}}`<chapter>`.'"
        assert chapter in order, f"glossary entry {term!r} names {chapter!r}, which is not in _toc.yml"
        text = page_markdown(chapter)
        assert text is not None and mentions(prose(text), term), (
            f"{chapter} is named as teaching {term!r} but never mentions it")


def test_no_chapter_uses_a_term_before_the_chapter_that_teaches_it(glossary):
    assert early_uses(toc_order(), taught_in(glossary), chapters()) == []


def test_every_term_role_names_a_glossary_entry(glossary):
    for stem, text in chapters().items():
        for a, b in ROLE.findall(prose(text)):
            assert (a or b).strip() in glossary, f"{stem}: {{term}}`{a or b}` has no glossary entry"


def test_allowed_mentions_are_still_needed(glossary):
    taught, pages = taught_in(glossary), chapters()
    for stem, term in ALLOWED:
        assert term in uses(pages[stem], taught), f"ALLOWED has ({stem!r}, {term!r}), which the page no longer uses"


def test_the_check_finds_an_early_use():
    order, taught = ["intro", "one", "two"], {"LayerNorm": "two", "token id": "one"}
    pages = {"one": "LayerNorm rescales; a {term}`token id` picks a row.\n```python\nLayerNorm\n```",
             "two": "The Token IDs again."}
    assert uses(pages["one"], taught) == {"LayerNorm", "token id"}
    assert uses("```python\nLayerNorm(x)\n```\n$$LayerNorm$$ a layernorm", taught) == set()  # case, code, math
    assert early_uses(order, taught, pages) == ["one uses 'LayerNorm', taught later in two"]
