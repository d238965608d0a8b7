"""The helpers package: plain re-exports with one owner per name, every name the chapters import, nothing from
tools/ or tests/."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import Counter
from importlib import import_module
from pathlib import Path

import pytest
import yaml

import helpers

PACKAGE = Path(helpers.__file__).parent
ROOT = PACKAGE.parent
MODULES = sorted(path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__")


def exported() -> dict[str, list[str]]:
    """Each submodule's __all__, by module name."""
    return {name: list(import_module(f"helpers.{name}").__all__) for name in MODULES}


def parse_code(source: str) -> ast.Module:
    """Parse a notebook cell or an exercise snippet; IPython's %magic and !shell lines become `pass`."""
    lines = [line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!")) else line
             for line in source.splitlines()]
    return ast.parse("\n".join(lines))


def helpers_imports(source: str) -> set[str]:
    """The names code takes from helpers: `from helpers import a, b`, `helpers.c`, `from helpers.x import d`."""
    names = set()
    for node in ast.walk(parse_code(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "helpers":
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "helpers":
            names.add(node.attr)
    return names


def texts(node):
    """Every string in a parsed YAML document."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from texts(value)
    elif isinstance(node, list):
        for value in node:
            yield from texts(value)


def chapter_imports() -> dict[str, set[str]]:
    """name -> the notebooks and exercise files whose code imports it from helpers."""
    used: dict[str, set[str]] = {}
    notebooks = sorted((ROOT / "book").glob("*.ipynb"))
    exercises = sorted((ROOT / "exercises").glob("*.yml"))
    assert notebooks and exercises, "no chapters found: is ROOT right?"
    for path in notebooks:
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and "helpers" in source:
                for name in helpers_imports(source):  # a cell that does not parse fails here, and should
                    used.setdefault(name, set()).add(path.name)
    for path in exercises:
        for text in texts(yaml.safe_load(path.read_text())):
            if "helpers" not in text:
                continue
            try:
                names = helpers_imports(text)
            except SyntaxError:  # prose (a prompt) that mentions helpers
                continue
            for name in names:
                used.setdefault(name, set()).add(path.name)
    return used


def test_the_parser_reads_every_form_of_import():
    cell = "%matplotlib inline\nfrom helpers import (a,\n    b)\nimport helpers\nhelpers.c()\n"
    cell += "if True:\n    !ls\nfrom helpers.tables import d\n"
    assert helpers_imports(cell) == {"a", "b", "c", "d"}
    assert helpers_imports("import torch\ntorch.nn") == set()


def test_init_re_exports_every_module_lazily():
    assert sorted(helpers.MODULES) == MODULES  # every module, each once
    docstring = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text()))
    assert all(f"    {name} " in docstring for name in MODULES), "the docstring's module map names every module"
    # the names the package offers are exactly the modules' own __all__, read by importing each module
    assert sorted(helpers.__all__) == sorted(name for names in exported().values() for name in names)
    assert set(helpers.__all__) | set(MODULES) <= set(dir(helpers))
    star: dict = {}
    exec("from helpers import *", star)  # noqa: S102
    assert set(helpers.__all__) <= set(star)
    with pytest.raises(AttributeError, match="no attribute 'not_a_helper'"):
        helpers.not_a_helper  # noqa: B018


def test_import_helpers_loads_no_module_until_one_is_used():
    code = "import json, sys, helpers; print(json.dumps(sorted(m for m in sys.modules if m.startswith("
    code += "('helpers.', 'torch', 'matplotlib', 'sklearn')))))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(loaded.stdout) == []


def test_every_module_lists_its_public_names():
    for module_name, names in exported().items():
        assert names and all(isinstance(n, str) and not n.startswith("_") for n in names), module_name


def test_every_exported_name_is_the_submodules_own_object():
    for module_name, names in exported().items():
        module = import_module(f"helpers.{module_name}")
        tree = ast.parse((PACKAGE / f"{module_name}.py").read_text())
        defined = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        defined |= {target.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                    for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                    if isinstance(target, ast.Name)}
        for name in names:
            assert name in defined, f"{name} is in helpers.{module_name}.__all__ but defined elsewhere"
            assert getattr(helpers, name) is getattr(module, name), f"helpers.{name}"
        assert getattr(helpers, module_name) is module


def test_no_name_is_exported_twice():
    counts = Counter(name for names in exported().values() for name in names)
    assert [name for name, count in counts.items() if count > 1] == []
    assert set(counts).isdisjoint(MODULES)  # a function named like a module would hide helpers.<module>


def test_every_name_the_chapters_import_exists():
    used = chapter_imports()
    assert {"load_bert", "setup"} <= set(used)  # the parser found the setup cells
    public = {name for names in exported().values() for name in names}
    missing = {name: sorted(places) for name, places in used.items() if name not in public}
    assert missing == {}


# Public before any chapter imports them: findings arrive chapter by chapter (issue 18).
NOT_YET_IMPORTED: set[str] = set()
# Public for the reader to call from a chapter's "More to try" list, where the prose names it.
MORE_TO_TRY = {"family_parameter_bars": "one_layer_many_families"}


def test_every_exported_name_is_used_by_a_chapter():
    """helpers/ teaches: a public name no notebook and no exercise imports is either private or gone."""
    used = chapter_imports()
    public = {name for names in exported().values() for name in names}
    assert NOT_YET_IMPORTED <= public  # an entry whose name is gone is stale
    unused = {name: module for module, names in exported().items() for name in names
              if name not in used and name not in NOT_YET_IMPORTED and name not in MORE_TO_TRY}
    assert unused == {}
    for name, chapter in MORE_TO_TRY.items():  # still named where the reader is told to try it
        assert f"`{name}`" in (ROOT / "book" / f"{chapter}.ipynb").read_text(), name


def test_no_helpers_module_imports_tools_or_tests():
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for module in modules:
                assert module.split(".")[0] not in ("tools", "tests"), f"{path.name} imports {module}"
                assert not (isinstance(node, ast.ImportFrom) and node.level), f"{path.name}: use absolute imports"
    code = "import json, sys, helpers; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
    code += "('tools', 'tests'))))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(loaded.stdout) == []
