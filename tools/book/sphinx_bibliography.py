"""Sphinx extension: the References page labels each entry by author and year, as the text cites it.

sphinxcontrib-bibtex's `plain` style numbers the entries ([1], [2], ...) while the chapters cite "Devlin et al.
(2019)"; this registers the pybtex style `authoryear`: plain's formatting and order, labels like "Devlin et al. 2019"
(a, b, ... after the year when two entries would share a label). _config.yml selects it.
"""

from __future__ import annotations

import re
from collections import Counter

from pybtex.plugin import register_plugin
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle


def _surname(person) -> str:
    """A person's last name without BibTeX braces or accents commands, e.g. '{V}aswani' -> 'Vaswani'."""
    return re.sub(r"[{}\\]|\\['`^\"~=.]", "", " ".join(person.last_names))


def author_year(entry) -> str:
    """'Ba et al. 2016', 'Wang and Chen 2020', 'Raffel et al. 2020': the label the text's citations match."""
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_surname(p) for p in people] or [entry.fields.get("organization", entry.key)]
    who = names[0] if len(names) == 1 else f"{names[0]} and {names[1]}" if len(names) == 2 else f"{names[0]} et al."
    return f"{who} {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabels(BaseLabelStyle):
    """Author-year labels, with a, b, ... appended where two entries would share one."""

    def format_labels(self, sorted_entries):
        entries = list(sorted_entries)
        labels = [author_year(entry) for entry in entries]
        shared, seen = Counter(labels), Counter()
        for label in labels:
            seen[label] += 1
            yield label + (chr(ord("a") + seen[label] - 1) if shared[label] > 1 else "")


class AuthorYearStyle(PlainStyle):
    """pybtex's plain style with author-year labels."""

    default_label_style = "authoryear"


def setup(app) -> dict:
    """Register the label and formatting styles with pybtex."""
    register_plugin("pybtex.style.labels", "authoryear", AuthorYearLabels)
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
