"""The argument checks every helper shares: integers, sizes against a memory bound, id tensors, the layer's family.

Each check raises TypeError (the wrong kind of thing) or ValueError (the right kind, a wrong value) saying what was
passed and what to pass instead. Shown at work in the appendix "When things go wrong".
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

__all__ = ["MEMORY_BOUND", "check_allocation", "check_embeddings", "integer", "ids_tensor"]

MEMORY_BOUND = 2 * 1024**3  # bytes: no helper allocates more than 2 GiB for one result (a laptop's spare memory)
HANDLED_EMBEDDINGS = ("BertEmbeddings", "RobertaEmbeddings")  # rebuilt exactly; tested against their forward
TABLES = ("word_embeddings", "token_type_embeddings", "position_embeddings", "LayerNorm", "dropout")
POSITION_TABLES = ("position_embeddings", "wpe", "embed_positions")  # BERT & co., GPT-2, RoFormer: absolute tables


def integer(name: str, value, minimum: int | None = None, even: bool = False, hint: str = "") -> int:
    """value as a Python int: ints, numpy integer scalars and 0-d integer tensors pass; bools and floats do not.

    minimum and even restrict the value; hint ends both errors' messages (": why, and what to pass")."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 and not value.is_floating_point() \
            and value.dtype != torch.bool:
        value = value.item()
    words = {None: "", 0: "non-negative ", 1: "positive "}.get(minimum, "") + ("even " if even else "")
    wanted = f"{words}integer" + (f" >= {minimum}" if minimum not in (None, 0, 1) else "")
    wanted = ("an " if wanted[0] in "aeiou" else "a ") + wanted
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(_sentence(f"{name} must be {wanted}, got {type(value).__name__} {value!r}{hint}"))
    value = int(value)
    if (minimum is not None and value < minimum) or (even and value % 2):
        raise ValueError(_sentence(f"{name} must be {wanted}, got {value}{hint}"))
    return value


def real(name: str, value, above: float | None = None, minimum: float | None = None, hint: str = "") -> float:
    """value as a finite Python float (ints, floats, numpy scalars); above: strict bound, minimum: inclusive one."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype != torch.bool:
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(_sentence(f"{name} must be a real number, got {type(value).__name__} {value!r}{hint}"))
    value = float(value)
    bound = f" greater than {above:g}" if above is not None else f" >= {minimum:g}" if minimum is not None else ""
    if not math.isfinite(value) or (above is not None and not value > above) or \
            (minimum is not None and value < minimum):
        raise ValueError(_sentence(f"{name} must be a finite number{bound}, got {value!r}{hint}"))
    return value


def _sentence(text: str) -> str:
    return text if text.endswith(".") else text + "."


def _size(nbytes: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes:.0f} bytes"


def check_allocation(what: str, shape: tuple[int, ...], bytes_per_element: int = 8, bound: int | None = None) -> int:
    """Refuse, before allocating, a result of this shape larger than the memory bound; return its size in bytes."""
    bound = MEMORY_BOUND if bound is None else bound
    nbytes = bytes_per_element
    for size in shape:
        nbytes *= int(size)
    if nbytes > bound:
        raise ValueError(f"{what} of shape {tuple(int(s) for s in shape)} would need {_size(nbytes)} of memory, "
                         f"above the helpers' bound of {_size(bound)} (helpers.validation.MEMORY_BOUND): "
                         "ask for fewer rows or columns.")
    return nbytes


def ids_tensor(name: str, ids) -> torch.Tensor:
    """Integer ids as a long tensor of shape (batch, seq) (a (seq,) input gets batch 1); refuse common mix-ups."""
    if isinstance(ids, Mapping):
        keys = ", ".join(map(repr, list(ids)[:4]))
        raise TypeError(f"{name} got the tokenizer's whole output ({type(ids).__name__} with keys {keys}): pass "
                        f"one of its entries, e.g. encoded['{name}'].")
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"{name} must hold integer ids, not text: run tokenizer(text, return_tensors='pt') first.")
    if isinstance(ids, (list, tuple)):
        ids = _nested_list(name, ids)
    elif isinstance(ids, np.ndarray) and ids.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integer ids, got a numpy array of dtype {ids.dtype}.")
    elif not isinstance(ids, (torch.Tensor, np.ndarray, numbers.Integral)) or isinstance(ids, bool):
        raise TypeError(f"{name} must be integer ids (a tensor, array or list of ints), got {type(ids).__name__}.")
    ids = torch.as_tensor(ids)
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise TypeError(f"{name} must be integer ids, got dtype {ids.dtype}.")
    if ids.dim() == 1:
        ids = ids.unsqueeze(0)  # (seq,) -> (1, seq)
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (batch, seq) or (seq,), got {tuple(ids.shape)}.")
    if ids.numel() == 0:
        raise ValueError(f"{name} has shape {tuple(ids.shape)}: there is nothing to embed. Even an empty string "
                         "tokenises to [CLS] [SEP]; pass at least one token.")
    return ids.long()


def position_rows(model: nn.Module) -> int | None:
    """How many tokens a model's absolute position table holds (RoBERTa's starts after its padding row); None when
    positions enter without a table (T5's buckets, rotary)."""
    for name, module in model.named_modules():
        if isinstance(module, nn.Embedding) and name.rsplit(".", 1)[-1] in POSITION_TABLES:
            start = 0 if module.padding_idx is None else module.padding_idx + 1  # RoBERTa counts from padding + 1
            return module.num_embeddings - start
    return None


def check_fits_model(model, helper: str, name: str, shape: tuple[int, int], ids: tuple[int, int],
                     positions: bool = True) -> None:
    """Refuse, before any forward pass, ids outside the model's token table, a sequence longer than its position
    table (when positions is True) and attention scores above the memory bound; ids is (smallest, largest)."""
    if not isinstance(model, nn.Module) or not hasattr(model, "get_input_embeddings") or \
            not hasattr(model, "config"):
        raise TypeError(f"{helper} needs a transformers model (load_bert()'s model, or build_family(name, "
                        f"tiny=True)), got {type(model).__name__}.")
    rows, kind = model.get_input_embeddings().num_embeddings, type(model).__name__
    if ids[0] < 0 or ids[1] >= rows:
        value = ids[0] if ids[0] < 0 else ids[1]
        raise ValueError(f"{name} holds {value}, outside {kind}'s token table of {rows} rows (0..{rows - 1}): use "
                         "the tokenizer that belongs to this model, or ids below its config.vocab_size.")
    batch, seq = shape
    limit = position_rows(model) if positions else None
    if limit is not None and seq > limit:
        raise ValueError(f"{name} has {seq} tokens but {kind}'s position table has {limit} rows: truncate it "
                         f"(tokenizer(..., truncation=True, max_length={limit})) or split it into windows.")
    heads = getattr(model.config, "num_attention_heads", 1)
    check_allocation(f"{helper}'s attention scores", (batch, heads, seq, seq), 4)


def model_ids(name: str, ids, model: nn.Module, helper: str, positions: bool = True) -> torch.Tensor:
    """ids as a (batch, seq) long tensor that this model can run: see ids_tensor and check_fits_model."""
    ids = ids_tensor(name, ids)  # (batch, seq)
    check_fits_model(model, helper, name, tuple(ids.shape), (int(ids.min()), int(ids.max())), positions)
    return ids


def _nested_list(name: str, ids: list | tuple) -> list:
    """Check a list of ints, or a list of equal-length lists of ints, before torch sees it."""
    if len(ids) == 0:
        raise ValueError(f"{name} is an empty list: there is nothing to embed; pass at least one token id.")
    rows = ids if all(isinstance(row, (list, tuple)) for row in ids) else [ids]
    for row in rows:
        for value in row:
            if isinstance(value, str):
                raise TypeError(f"{name} holds token strings such as {value!r}: convert them to ids with "
                                "tokenizer.convert_tokens_to_ids(tokens).")
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
                raise TypeError(f"{name} must hold integer ids, got {type(value).__name__} {value!r}.")
    lengths = sorted({len(row) for row in rows})
    if len(lengths) > 1:
        raise ValueError(f"{name} is ragged (rows of lengths {lengths}): pad the batch to one length with "
                         "tokenizer(texts, padding=True, return_tensors='pt').")
    return [[int(value) for value in row] for row in rows]


def embedding_layer(embeddings, helper: str) -> nn.Module:
    """Refuse anything but a module that is not a whole model: the mistake model for model.embeddings."""
    kind = type(embeddings).__name__
    if not isinstance(embeddings, nn.Module):
        raise TypeError(f"{helper} needs the model's embedding layer (model.embeddings), got {kind}.")
    if isinstance(getattr(embeddings, "embeddings", None), nn.Module):
        raise TypeError(f"{helper} got the whole {kind}: pass its embedding layer, model.embeddings.")
    return embeddings


def whole_model(model, helper: str) -> nn.Module:
    """Refuse anything but a whole model with an embedding layer: the mistake model.embeddings for model."""
    kind = type(model).__name__
    if isinstance(model, nn.Module) and hasattr(model, "word_embeddings"):
        raise TypeError(f"{helper} got the embedding layer {kind}: pass the whole model (load_bert() returns it), "
                        "not model.embeddings.")
    if not isinstance(model, nn.Module) or not isinstance(getattr(model, "embeddings", None), nn.Module):
        raise TypeError(f"{helper} needs the whole model (model, tokenizer = load_bert()), got {kind}.")
    return model


def check_tokenizer(value, helper: str):
    """Refuse what is not a tokenizer (the model, a text, a vocabulary) where the tokenizer goes."""
    if isinstance(value, nn.Module) or not callable(value) or not hasattr(value, "convert_tokens_to_ids"):
        raise TypeError(f"{helper} needs the tokenizer (model, tokenizer = load_bert()) where it got "
                        f"{type(value).__name__}: check the order of the arguments.")
    return value


def numbers_tensor(name: str, value, what: str = "numbers") -> torch.Tensor:
    """Numbers (tensor, array or nested list) as a tensor of their dtype; text, dicts, layers, None, bools refused."""
    if isinstance(value, nn.Module):
        hint = " (its .weight)" if hasattr(value, "weight") else ""
        raise TypeError(f"{name} must be a tensor of {what}, got the layer {type(value).__name__}: pass its "
                        f"weights{hint}, detached.")
    if value is None or isinstance(value, (str, bytes, Mapping)) or not isinstance(
            value, (torch.Tensor, np.ndarray, list, tuple)):
        raise TypeError(f"{name} must be a tensor of {what}, got {type(value).__name__}.")
    try:
        tensor = torch.as_tensor(value)
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(f"{name} must be a tensor of {what}, got a {type(value).__name__} torch cannot read "
                        f"as numbers ({error}).") from None
    if tensor.dtype == torch.bool or tensor.dtype.is_complex:
        raise TypeError(f"{name} must hold real numbers, got dtype {tensor.dtype}.")
    return tensor


def strings(name: str, value, what: str = "words") -> list[str]:
    """A non-empty list (or tuple) of str; one str, dicts, ids and a tokenizer's output refused."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)) or \
            not all(isinstance(item, str) for item in value):
        shown = type(value).__name__ if not isinstance(value, (str, list, tuple)) else repr(value)[:60]
        raise TypeError(f"{name} must be a list of {what} (str), e.g. ['bank', 'river']; got {shown}.")
    if not value:
        raise ValueError(f"{name} is empty: pass at least one {what[:-1] if what.endswith('s') else what}.")
    return list(value)


def check_embeddings(embeddings, helper: str) -> str:
    """Refuse anything but an embedding layer the helper rebuilds exactly; return the layer's class name."""
    kind = type(embedding_layer(embeddings, helper)).__name__
    if kind not in HANDLED_EMBEDDINGS:
        family = type(embeddings).__module__.split(".")[-2] if "models." in type(embeddings).__module__ else ""
        missing = [name for name in TABLES if not hasattr(embeddings, name)]
        about = [f"the {family} family" if family else "", f"it has no {', '.join(missing)}" if missing else ""]
        about = "; ".join(part for part in about if part)
        raise TypeError(f"{helper} rebuilds {' and '.join(HANDLED_EMBEDDINGS)} exactly; {kind}"
                        f"{f' ({about})' if about else ''} is another family's layer: call it directly, "
                        "or see the chapter on the families.")
    return kind
