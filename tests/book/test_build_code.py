"""tools/book/fingerprint.py: a change to the build's own code (tools/book) renders every page again and keeps the
execution cache; any other change still empties both."""

from __future__ import annotations

import shutil

from tools.book import fingerprint as fp
from tools.environment import ROOT


def built(build, names=fp.BUILD_OUTPUTS) -> None:
    """A build folder holding a file in each output a build leaves behind."""
    for name in names:
        (build / name).mkdir(parents=True, exist_ok=True)
        (build / name / "kept").write_text("x")


def left(build) -> list[str]:
    return sorted(name for name in fp.BUILD_OUTPUTS if (build / name / "kept").exists())


def test_an_edited_extension_changes_only_the_build_code_entry(tmp_path):
    shutil.copytree(ROOT / "tools" / "book", tmp_path / "tools" / "book",
                    ignore=shutil.ignore_patterns("__pycache__"))
    before = fp.fingerprint(tmp_path)
    extension = tmp_path / "tools" / "book" / "sphinx_phone_figures.py"
    extension.write_text(extension.read_text().replace("PHONE_MAX_PX = ", "PHONE_MAX_PX = 1 + "))
    after = fp.fingerprint(tmp_path)
    assert fp.changed_keys(before, after) == [fp.BUILD_CODE]
    assert before[fp.BUILD_CODE] == fp.build_code_digest(ROOT)  # the same files as the repository's own


def test_a_changed_build_code_removes_the_rendered_pages_and_keeps_the_cache(tmp_path, capsys):
    fp.record_fingerprint(tmp_path, {"helpers_and_pins": "a", fp.BUILD_CODE: "1"})
    built(tmp_path)
    assert fp.record_fingerprint(tmp_path, {"helpers_and_pins": "a", fp.BUILD_CODE: "2"}) == [fp.BUILD_CODE]
    assert left(tmp_path) == [".jupyter_cache", "jupyter_execute"]
    assert "cache kept" in capsys.readouterr().out


def test_build_code_and_anything_else_changed_together_empty_the_cache_too(tmp_path):
    fp.record_fingerprint(tmp_path, {"helpers_and_pins": "a", fp.BUILD_CODE: "1"})
    built(tmp_path)
    assert fp.record_fingerprint(tmp_path, {"helpers_and_pins": "b", fp.BUILD_CODE: "2"}) == [
        fp.BUILD_CODE, "helpers_and_pins"]
    assert left(tmp_path) == []
