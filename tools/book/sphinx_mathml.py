"""Sphinx extension: the book's math as MathML written at build time, so a page fetches no math script or font.

latex2mathml converts each formula's TeX; current Chromium, Firefox and Safari draw MathML Core natively, with the
system's math font, and expose it to screen readers as math. MathJax (its startup, TeX input, output and fonts) was
about 0.8 MB of a cold visit for a handful of formulas on each page.

MathML Core draws `mathvariant` only as "normal", so a letter in another style (\\mathcal N, \\mathbf x) becomes
its Unicode mathematical letter (𝒩, 𝐱); MathML 3's named spaces (\\, \\!) become lengths in em.
"""

from __future__ import annotations

import unicodedata
from xml.etree import ElementTree

from docutils import nodes
from latex2mathml.converter import convert
from sphinx.locale import _
from sphinx.util.math import get_node_equation_number

MATHML = "http://www.w3.org/1998/Math/MathML"
ElementTree.register_namespace("", MATHML)  # <math xmlns=...>, not <ns0:math>
NAMED_SPACES = {"thinmathspace": "0.167em", "mediummathspace": "0.222em", "thickmathspace": "0.278em",
                "negativethinmathspace": "-0.167em", "negativemediummathspace": "-0.222em",
                "negativethickmathspace": "-0.278em"}
# Letters Unicode keeps in the Letterlike Symbols block, outside the Mathematical Alphanumeric one.
LETTERLIKE = {"ITALIC SMALL H": "PLANCK CONSTANT", "FRAKTUR CAPITAL C": "BLACK-LETTER CAPITAL C",
              "FRAKTUR CAPITAL H": "BLACK-LETTER CAPITAL H", "FRAKTUR CAPITAL I": "BLACK-LETTER CAPITAL I",
              "FRAKTUR CAPITAL R": "BLACK-LETTER CAPITAL R", "FRAKTUR CAPITAL Z": "BLACK-LETTER CAPITAL Z"}


def styled_letter(letter: str, variant: str, tex: str) -> str:
    """The Unicode mathematical letter for `letter` drawn in MathML `variant` ("script", "bold", ...)."""
    if not ("A" <= letter <= "Z" or "a" <= letter <= "z"):
        raise ValueError(f"the formula '{tex}' styles '{letter}' as {variant}: MathML Core cannot; "
                         "style only Latin letters, or write the styled character itself")
    name = f"{variant.upper().replace('BOLD-', 'BOLD ')} {'CAPITAL' if letter.isupper() else 'SMALL'} {letter.upper()}"
    for candidate in (f"MATHEMATICAL {name}", LETTERLIKE.get(name, ""), name):
        try:
            return unicodedata.lookup(candidate)
        except KeyError:
            continue
    raise ValueError(f"the formula '{tex}' styles '{letter}' as {variant}, which Unicode has no letter for")


def mathml(tex: str, display: str) -> str:
    """MathML Core for one TeX formula; display is "inline" or "block"."""
    root = ElementTree.fromstring(convert(tex, display=display))
    for element in root.iter():
        variant = element.attrib.get("mathvariant", "normal")
        if variant != "normal":
            del element.attrib["mathvariant"]
            element.text = "".join(styled_letter(letter, variant, tex) for letter in element.text or "")
        if element.attrib.get("width") in NAMED_SPACES:
            element.set("width", NAMED_SPACES[element.get("width")])
    return ElementTree.tostring(root, encoding="unicode")


def visit_math(self, node: nodes.math) -> None:
    """Inline math: a span holding one <math>."""
    self.body.append(self.starttag(node, "span", "", CLASS="math notranslate nohighlight"))
    self.body.append(mathml(node.astext(), "inline") + "</span>")
    raise nodes.SkipNode


def visit_math_block(self, node: nodes.math_block) -> None:
    """Display math: a div with the equation's number and one block <math> per paragraph of the TeX."""
    self.body.append(self.starttag(node, "div", CLASS="math notranslate nohighlight"))
    if node["number"]:
        self.body.append(f'<span class="eqno">({get_node_equation_number(self, node)})')
        self.add_permalink_ref(node, _("Link to this equation"))
        self.body.append("</span>")
    parts = [part for part in node.astext().split("\n\n") if part.strip()]
    self.body.extend(mathml(part, "block") for part in parts)
    self.body.append("</div>\n")
    raise nodes.SkipNode


def setup(app) -> dict:
    """Register the renderer; _config.yml selects it with html_math_renderer: mathml."""
    app.add_html_math_renderer("mathml", (visit_math, None), (visit_math_block, None))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
