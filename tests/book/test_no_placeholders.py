"""The built book names no placeholder and no repository but its own: _config.yml's repository.url."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

import yaml
from bs4 import BeautifulSoup

from tests.book.conftest import require_built_book
from tools.book.toc import ROOT

URL = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
REPOSITORY = urlparse(URL).path.strip("/")
# GitHub owners of projects the book cites that are not this book, each with where and why.
EXTERNAL_OWNERS = {
    "containers": "bubblewrap, the grading sandbox (book/teachers.md)",
}
# An angle-bracket placeholder stands for something the author meant to fill in; `<chapter>` or `<student-id>` in a
# path pattern, `<pad>` in a tokenizer's output, are not. These words mark the first kind.
PLACEHOLDER_WORDS = {"it", "this", "your", "repo", "repository", "url", "org", "organisation", "organization", "user",
                     "username", "owner", "project", "link", "here"}
ANGLE = re.compile(r"<([A-Za-z][\w -]*)>")
FAKE = re.compile(r"example\.(?:com|org|net)|your-org|your-name|USERNAME")
# A repository on GitHub, and the launch services that open one (Binder, Colab).
GITHUB = re.compile(r"(?:github\.com|mybinder\.org/v2/gh|colab\.research\.google\.com/github)/([\w.-]+)/([\w.-]+)")


def problems(text: str, repository: str = REPOSITORY) -> list[str]:
    """Every placeholder, fake host and foreign GitHub repository in a page's markup or text."""
    found = [f"placeholder <{words}>" for words in ANGLE.findall(text)
             if PLACEHOLDER_WORDS & set(re.split(r"[\s_-]+", words.lower()))]
    found += [f"fake address {match}" for match in FAKE.findall(text)]
    for owner, name in GITHUB.findall(text):
        name = name.removesuffix(".git").rstrip(".")
        if f"{owner}/{name}" != repository and owner not in EXTERNAL_OWNERS:
            found.append(f"repository {owner}/{name}")
    return sorted(set(found))


def _page_text(path: Path) -> str:
    """A page's markup (attributes: links) and its visible text (where `<it>` is `&lt;it&gt;` in the markup)."""
    markup = path.read_text(encoding="utf-8")
    if path.suffix != ".html":
        return markup
    soup = BeautifulSoup(markup, "html.parser")
    for tag in soup(["script", "style"]):
        tag.decompose()
    return markup + "\n" + soup.get_text()


def test_the_scanner_finds_each_kind_and_passes_the_book_s_own_links():
    page = f"""<pre>git clone &lt;this repository&gt; &amp;&amp; cd &lt;it&gt;</pre>
    <a href="https://github.com/{REPOSITORY}">repo</a> <a href="https://github.com/containers/bubblewrap">bwrap</a>
    <a href="https://mybinder.org/v2/gh/someone/fork/main?urlpath=x">Binder</a> https://example.com/x
    <code>exercises/&lt;chapter&gt;.yml</code> <pre>['&lt;pad&gt;', '[CLS]']</pre> github.com/your-org/book"""
    soup_text = BeautifulSoup(page, "html.parser").get_text()
    assert problems(page + "\n" + soup_text) == sorted([
        "placeholder <this repository>", "placeholder <it>", "repository someone/fork", "fake address example.com",
        "fake address your-org", "repository your-org/book"])


def test_the_built_book_has_no_placeholder_and_no_other_repository():
    html = require_built_book()
    pages = sorted(p for p in html.rglob("*") if p.suffix in (".html", ".ipynb") and "_static" not in p.parts)
    assert len(pages) > 10
    found = {path.relative_to(html).as_posix(): problems(_page_text(path)) for path in pages}
    assert not {page: issues for page, issues in found.items() if issues}


def test_the_intro_clones_the_configured_repository():
    soup = BeautifulSoup((require_built_book() / "book" / "intro.html").read_text(encoding="utf-8"), "html.parser")
    clones = [pre.get_text().strip() for pre in soup.select("pre") if "git clone" in pre.get_text()]
    assert clones == [f"git clone {URL}\ncd {URL.rstrip('/').split('/')[-1]}"]
