"""Every kind of damaged checkpoint is refused by load_bert() with a CheckpointError naming the file and the fault.

Each damaged copy is built in tmp_path from the packaged checkpoint (never touching the installed package), and
each load runs in a fresh process, so no cache or patched module of this test process can help it: a forkserver
started for this module imports helpers once, and forks one new process per load (a new interpreter per load cost
25 s each on this shared machine; the fork shares only the imported modules, no loaded model, no cache).
"""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from helpers import checkpoint

WEIGHTS = "model.safetensors"
TOKENIZER = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def copy_packaged(destination: Path, replace: tuple[str, ...] = ()) -> Path:
    """Link every packaged file into destination, except those in `replace`, which are copied to be damaged."""
    source = checkpoint.packaged_dir()
    for name in checkpoint.PACKAGED_SHA256:
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name in replace:
            target.write_bytes((source / name).read_bytes())
        else:
            target.symlink_to(source / name)
    return destination


def _load_and_report(spec: str, packaged_copy: str | None, connection) -> None:
    """Run in a forked process: load_bert() with BERT_BOOK_CHECKPOINT=spec; send back the error, if any."""
    os.environ[checkpoint.ENV_VAR] = spec
    if packaged_copy:  # stand a damaged copy in for the installed package
        checkpoint.packaged_dir = lambda: Path(packaged_copy)
    try:
        checkpoint.load_bert()
        connection.send({"type": None, "message": "", "bases": []})
    except Exception as error:
        connection.send({"type": type(error).__name__, "message": str(error),
                         "bases": [cls.__name__ for cls in type(error).__mro__]})


@pytest.fixture(scope="module")
def fresh():
    """A forkserver that has imported helpers.checkpoint and nothing else of this process."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["helpers.checkpoint", "tests.unit.test_damaged_checkpoints"])
    return context


def load_in_fresh_process(context, spec: str, packaged_copy: Path | None = None) -> dict:
    """load_bert() in a new process with BERT_BOOK_CHECKPOINT=spec; the error's type, classes and message."""
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_load_and_report, args=(spec, packaged_copy and str(packaged_copy), send))
    process.start()
    send.close()
    result = receive.recv() if receive.poll(300) else None
    process.join(60)
    assert process.exitcode == 0 and result is not None, process.exitcode
    return result


def edit_weights(directory: Path, change) -> None:
    """Rewrite model.safetensors after change(state_dict) edits the tensors in place."""
    tensors = load_file(checkpoint.packaged_dir() / WEIGHTS)
    change(tensors)
    (directory / WEIGHTS).unlink()
    save_file(tensors, directory / WEIGHTS, metadata={"format": "pt"})


def missing_tensor(d):
    edit_weights(d, lambda t: t.pop("embeddings.word_embeddings.weight"))


def mismatched_tensor(d):
    edit_weights(d, lambda t: t.update({"embeddings.word_embeddings.weight":
                                        t["embeddings.word_embeddings.weight"][:100].clone()}))


def nan_weights(d):
    edit_weights(d, lambda t: t["encoder.layer.0.attention.self.query.weight"].__setitem__((0, 0), float("nan")))


def inf_weights(d):
    edit_weights(d, lambda t: t["embeddings.LayerNorm.weight"].__setitem__(3, float("inf")))


def truncated_weights(d):
    (d / WEIGHTS).write_bytes((checkpoint.packaged_dir() / WEIGHTS).read_bytes()[:5_000_000])


def not_safetensors(d):
    (d / WEIGHTS).write_bytes(b"<html>404 Not Found</html>")


def no_weights(d):
    (d / WEIGHTS).unlink()


def no_config(d):
    (d / "config.json").unlink()


def broken_config(d):
    (d / "config.json").write_text('{"model_type": "bert", ')


def no_tokenizer_files(d):
    for name in TOKENIZER:
        (d / name).unlink()


def tokenizer_larger_than_table(d):
    (d / "tokenizer.json").unlink()
    vocab = (d / "vocab.txt").read_text()
    (d / "vocab.txt").write_text(vocab + "".join(f"extra{i}\n" for i in range(10)))


def lowercasing_switched_off(d):
    for name in ("tokenizer.json", "tokenizer_config.json"):
        config = json.loads((d / name).read_text())
        if name == "tokenizer.json":
            config["normalizer"]["lowercase"] = False
        else:
            config["do_lower_case"] = False
        (d / name).write_text(json.dumps(config))


# kind -> (how to damage a local copy, the files it rewrites, what the message must say)
LOCAL = {
    "missing tensor": (missing_tensor, (WEIGHTS,), r"missing keys \['embeddings\.word_embeddings\.weight'\]"),
    "tensor of the wrong shape": (mismatched_tensor, (WEIGHTS,), r"word_embeddings\.weight is \(100, 384\)"),
    "NaN weight": (nan_weights, (WEIGHTS,), r"query\.weight holds NaN or infinite"),
    "infinite weight": (inf_weights, (WEIGHTS,), r"LayerNorm\.weight holds NaN or infinite"),
    "truncated weights file": (truncated_weights, (WEIGHTS,), r"model\.safetensors is damaged \(truncated"),
    "weights file that is not safetensors": (not_safetensors, (WEIGHTS,), r"model\.safetensors is damaged"),
    "no weights file": (no_weights, (WEIGHTS,), r"model\.safetensors is missing"),
    "no config.json": (no_config, ("config.json",), r"config\.json is missing"),
    "config.json not JSON": (broken_config, ("config.json",), r"config\.json is not valid JSON"),
    "no tokenizer files": (no_tokenizer_files, TOKENIZER, r"holds no tokenizer files"),
    "tokenizer larger than the token table": (tokenizer_larger_than_table, ("tokenizer.json", "vocab.txt"),
                                              r"knows 30532 tokens but the token table has 30522 rows"),
    "lower-casing switched off": (lowercasing_switched_off, ("tokenizer.json", "tokenizer_config.json"),
                                  r"maps the ordinary words 'Hello World' to \[UNK\] only"),
}


def assert_refused(result: dict, pattern: str, path: Path) -> None:
    import re

    assert result["type"] == "CheckpointError", result
    assert "ValueError" in result["bases"]
    assert re.search(pattern, result["message"]), result["message"]
    assert str(path) in result["message"], result["message"]  # names the file or directory


@pytest.mark.parametrize("kind", LOCAL)
def test_a_damaged_local_checkpoint_is_refused(kind, tmp_path, fresh):
    damage, files, pattern = LOCAL[kind]
    directory = copy_packaged(tmp_path / "copy", replace=files)
    damage(directory)
    assert_refused(load_in_fresh_process(fresh, str(directory)), pattern, directory)


def test_the_undamaged_copy_loads(tmp_path, fresh):
    directory = copy_packaged(tmp_path / "copy")
    assert load_in_fresh_process(fresh, str(directory))["type"] is None  # the control: only the damage is refused


@pytest.mark.parametrize("name", ["tokenizer_config.json", "special_tokens_map.json", "1_Pooling/config.json"])
@pytest.mark.parametrize("how", ["altered", "deleted"])
def test_every_packaged_file_is_hash_checked(name, how, tmp_path, fresh):
    directory = copy_packaged(tmp_path / "packaged", replace=(name,))
    if how == "deleted":
        (directory / name).unlink()
    else:
        (directory / name).write_text((directory / name).read_text() + " ")  # one byte more
    result = load_in_fresh_process(fresh, "", packaged_copy=directory)
    assert_refused(result, r"is missing or altered .*Reinstall", directory / name)


def test_a_file_where_a_directory_is_expected(tmp_path, fresh):
    directory = copy_packaged(tmp_path / "copy")
    result = load_in_fresh_process(fresh, str(directory / "config.json"))
    assert_refused(result, r"which is a file, not a directory", directory / "config.json")
    assert "does not exist" not in result["message"]


def test_the_damage_is_really_there(tmp_path):
    """Control for the weights kinds: the damaged tensors differ from the packaged ones as intended."""
    directory = copy_packaged(tmp_path / "copy", replace=(WEIGHTS,))
    nan_weights(directory)
    tensors = load_file(directory / WEIGHTS)
    assert torch.isnan(tensors["encoder.layer.0.attention.self.query.weight"]).sum() == 1
