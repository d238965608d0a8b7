"""Helpers for the book on BERT's input embeddings; notebooks import from here, not from submodules.

A name loads only the submodule that defines it (its `__all__`, read here without importing anything), so
`from helpers import load_bert` costs no scikit-learn, and the pytest and Sphinx plugins that live in this
package (pytest_gpu, pytest_nbval, sphinx_gpu, sphinx_fixes) start without torch.
"""

import ast
from importlib import import_module
from pathlib import Path

MODULES = ("anatomy", "checkpoint", "families", "gpu", "notebook", "plots", "positions", "relative_positions",
           "segments", "sinusoids", "tables", "tokens")


def declared_names(module_name: str) -> list[str]:
    """The names a submodule lists in its one `__all__ = [...]`, read from its source without importing it."""
    tree = ast.parse((Path(__file__).parent / f"{module_name}.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(target, "id", "") == "__all__" for target in node.targets):
            return ast.literal_eval(node.value)
    raise ImportError(f"helpers/{module_name}.py has no `__all__ = [...]` list")


OWNER = {name: module_name for module_name in MODULES for name in declared_names(module_name)}
__all__ = sorted(OWNER)


def __getattr__(name: str):
    """`from helpers import x` and `helpers.x` import x's submodule on first use (PEP 562); so does `helpers.plots`."""
    if name in MODULES:
        return import_module(f"{__name__}.{name}")
    if name not in OWNER:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{OWNER[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """Tab completion lists the public names before they are loaded."""
    return sorted({*globals(), *__all__})
