"""The helpers package: every public name reachable from `helpers`, and plugins that start without torch."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import helpers

PACKAGE = Path(helpers.__file__).parent
PLUGINS = ("pytest_gpu", "pytest_nbval", "sphinx_gpu", "sphinx_fixes")
NOT_FOR_NOTEBOOKS = (*PLUGINS, "exercises", "__init__")  # exercises is a program: python -m helpers.exercises
HEAVY = ("torch", "transformers", "sklearn", "matplotlib", "scipy")


def test_every_notebook_module_is_listed():
    modules = sorted(path.stem for path in PACKAGE.glob("*.py") if path.stem not in NOT_FOR_NOTEBOOKS)
    assert sorted(helpers.MODULES) == modules


def test_every_public_name_is_the_submodules_object():
    for module_name in helpers.MODULES:
        module = import_module(f"helpers.{module_name}")
        names = [name for name, owner in helpers.OWNER.items() if owner == module_name]
        assert names and sorted(names) == sorted(module.__all__)  # the source, read by ast, against the import
        for name in names:
            assert getattr(helpers, name) is getattr(module, name), f"helpers.{name}"
    assert sum(len(import_module(f"helpers.{m}").__all__) for m in helpers.MODULES) == len(helpers.__all__)  # no twins


def test_submodules_are_attributes_too():
    assert helpers.plots is import_module("helpers.plots")


def test_unknown_name_is_an_attribute_error():
    try:
        helpers.no_such_helper  # noqa: B018
    except AttributeError as error:
        assert "no_such_helper" in str(error)
    else:
        raise AssertionError("helpers.no_such_helper did not raise AttributeError")


def modules_loaded_by(statements: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules starting with one of prefixes that a fresh interpreter holds after running statements."""
    report = f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({prefixes!r}))))"
    code = f"import json, sys\n{statements}\n{report}"
    return json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def test_a_name_loads_only_its_module():
    loaded = modules_loaded_by("from helpers import ResultTable, load_bert", ("helpers.", "sklearn"))
    assert loaded == ["helpers.checkpoint", "helpers.tables"]


def test_plugins_start_without_heavy_libraries():
    imports = "\n".join(f"import helpers.{name}" for name in PLUGINS)
    assert modules_loaded_by(imports, HEAVY) == []
