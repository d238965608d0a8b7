"""tools/book/checkpoint_used.py: a build is emptied when the checkpoint changes, and left alone (mtime too) when not."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import checkpoint
from tools.book.checkpoint_used import BUILD_OUTPUTS, DEFAULT, RECORD, checkpoint_asked, record_checkpoint


def fake_build(build):
    """A build folder holding a file in each output that a build leaves behind."""
    for name in BUILD_OUTPUTS:
        (build / name).mkdir(parents=True)
        (build / name / "kept").write_text("x")


def outputs_left(build) -> list[str]:
    return sorted(name for name in BUILD_OUTPUTS if (build / name / "kept").exists())


@pytest.mark.parametrize("value", [None, "", "  ", "bert-base-uncased", " /data/my-bert "])
def test_reads_the_variable_as_helpers_does(monkeypatch, value):
    if value is None:
        monkeypatch.delenv("BERT_BOOK_CHECKPOINT", raising=False)
    else:
        monkeypatch.setenv("BERT_BOOK_CHECKPOINT", value)
    assert checkpoint_asked() == checkpoint.checkpoint_spec()
    assert DEFAULT == checkpoint.PACKAGED


def test_a_build_without_a_record_was_made_with_the_default(tmp_path):
    fake_build(tmp_path)
    assert record_checkpoint(tmp_path, DEFAULT) is False
    assert outputs_left(tmp_path) == sorted(BUILD_OUTPUTS)
    assert (tmp_path / RECORD).read_text() == DEFAULT


def test_the_same_checkpoint_keeps_the_build_and_the_record_time(tmp_path):
    record_checkpoint(tmp_path, "bert-base-uncased")
    fake_build(tmp_path)  # built with it
    before = (tmp_path / RECORD).stat().st_mtime_ns
    assert record_checkpoint(tmp_path, "bert-base-uncased") is False
    assert (tmp_path / RECORD).stat().st_mtime_ns == before  # make sees nothing new
    assert outputs_left(tmp_path) == sorted(BUILD_OUTPUTS)


def test_another_checkpoint_empties_the_cache_and_the_build(tmp_path, capsys):
    fake_build(tmp_path)
    (tmp_path / "bench.json").write_text("{}")  # not a build output: stays
    assert record_checkpoint(tmp_path, "/data/my-bert") is True
    assert outputs_left(tmp_path) == []
    assert (tmp_path / "bench.json").exists()
    assert (tmp_path / RECORD).read_text() == "/data/my-bert"
    assert "'packaged', now '/data/my-bert'" in capsys.readouterr().out
    assert record_checkpoint(tmp_path, DEFAULT) is True  # and back


def test_the_book_target_depends_on_the_record():
    makefile = (Path(__file__).parents[2] / "Makefile").read_text()
    assert "$(BOOK_BUILT): $(STAMP) $(BOOK_INPUTS) $(CHECKPOINT_USED)" in makefile
    assert "$(CHECKPOINT_USED): FORCE" in makefile and f"CHECKPOINT_USED := _build/{RECORD}" in makefile
