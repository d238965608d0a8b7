"""BERT's embedding layer taken apart: inputs checked, three lookups, sum, LayerNorm, dropout."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["EmbeddingParts", "check_embedding_inputs", "embedding_parts", "embedding_parameter_table",
           "layer_norm_by_hand", "DropoutStatistics", "dropout_statistics", "PART_NAMES", "part_shares",
           "precision_tolerance", "compare_on_device"]


@dataclass
class EmbeddingParts:
    """The named intermediate tensors of BertEmbeddings.forward, each (batch, seq, hidden)."""

    token: torch.Tensor
    segment: torch.Tensor
    position: torch.Tensor
    summed: torch.Tensor
    normalized: torch.Tensor
    output: torch.Tensor


def _as_ids(name: str, ids) -> torch.Tensor:
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"{name} must hold integer ids, not text: run tokenizer(text, return_tensors='pt') first.")
    ids = torch.as_tensor(ids)
    if ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise TypeError(f"{name} must be integer ids, got dtype {ids.dtype}.")
    if ids.dim() == 1:
        ids = ids.unsqueeze(0)  # (seq,) -> (1, seq)
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (batch, seq) or (seq,), got {tuple(ids.shape)}.")
    return ids.long()


def _check_range(name: str, ids: torch.Tensor, rows: int, table: str, advice: str) -> None:
    bad = (ids < 0) | (ids >= rows)
    if bad.any():
        value = int(ids[bad][0])
        raise ValueError(f"{name} holds {value}, outside the {table} of {rows} rows (0..{rows - 1}). {advice}")


def check_embedding_inputs(embeddings: nn.Module, input_ids, token_type_ids=None, position_ids=None):
    """Validate ids against the layer's tables; return (input_ids, token_type_ids, position_ids), each (batch, seq)."""
    vocab_rows = embeddings.word_embeddings.num_embeddings
    type_rows = embeddings.token_type_embeddings.num_embeddings
    limit = embeddings.position_embeddings.num_embeddings
    input_ids = _as_ids("input_ids", input_ids)
    batch, seq = input_ids.shape
    if batch == 0 or seq == 0:
        raise ValueError(
            f"input_ids has shape {(batch, seq)}: there is nothing to embed. "
            "Even an empty string tokenises to [CLS] [SEP]; pass at least one token."
        )
    if seq > limit and position_ids is None:
        raise ValueError(
            f"The sequence has {seq} tokens but the position table has {limit} rows. "
            f"Truncate it (tokenizer(..., truncation=True, max_length={limit})) or split it into windows."
        )
    _check_range("input_ids", input_ids, vocab_rows, "token table",
                 "Use the tokenizer that belongs to this checkpoint.")
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)  # BertEmbeddings' zeros buffer does the same
    token_type_ids = _as_ids("token_type_ids", token_type_ids)
    if token_type_ids.shape != input_ids.shape:
        raise ValueError(
            f"token_type_ids has shape {tuple(token_type_ids.shape)} but input_ids has {tuple(input_ids.shape)}: "
            "give one token type per token (tokenizer(text_a, text_b) returns both, aligned)."
        )
    _check_range("token_type_ids", token_type_ids, type_rows, "token-type (segment) table",
                 "BERT knows sentence A (0) and sentence B (1) only.")
    if position_ids is None:
        position_ids = torch.arange(seq, device=input_ids.device).expand(batch, seq)  # on the ids' device
    position_ids = _as_ids("position_ids", position_ids)
    if position_ids.shape[-1] != seq:
        raise ValueError(f"position_ids has {position_ids.shape[-1]} positions but the sequence has {seq} tokens.")
    _check_range("position_ids", position_ids, limit, "position table",
                 "Positions count from 0 and stop at the table's last row.")
    return input_ids, token_type_ids, position_ids.expand(batch, seq)


def embedding_parts(embeddings: nn.Module, input_ids, token_type_ids=None, position_ids=None) -> EmbeddingParts:
    """Rebuild BertEmbeddings.forward step by step, summing in the model's own order."""
    input_ids, token_type_ids, position_ids = check_embedding_inputs(embeddings, input_ids, token_type_ids,
                                                                     position_ids)
    token = embeddings.word_embeddings(input_ids)  # (batch, seq, hidden)
    segment = embeddings.token_type_embeddings(token_type_ids)  # (batch, seq, hidden)
    position = embeddings.position_embeddings(position_ids)  # (batch, seq, hidden)
    summed = (token + segment) + position  # the model's order: (word + type) + position
    normalized = embeddings.LayerNorm(summed)
    output = embeddings.dropout(normalized)
    return EmbeddingParts(token, segment, position, summed, normalized, output)


def embedding_parameter_table(model: nn.Module) -> list[dict]:
    """Rows (part, shape, parameters, share of the whole model) for the embedding layer's parameters."""
    total = sum(p.numel() for p in model.parameters())
    rows = []
    for name, parameter in model.embeddings.named_parameters():
        rows.append({"part": name, "shape": tuple(parameter.shape), "parameters": parameter.numel(),
                     "share": parameter.numel() / total})
    return rows


# ---------------------------------------------------------------- LayerNorm, dropout, shares, precision

PART_NAMES = ("token", "segment", "position")


def layer_norm_by_hand(x, weight=None, bias=None, eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm over the last axis: (x - mean) / sqrt(biased variance + eps), then * weight + bias if given."""
    x = torch.as_tensor(x)
    if not x.dtype.is_floating_point:
        raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}.")
    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(f"x has shape {tuple(x.shape)}: LayerNorm needs at least one feature in the last axis.")
    eps = float(eps)
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be a finite number >= 0, got {eps}.")
    hidden = x.shape[-1]
    for name, value in (("weight", weight), ("bias", bias)):
        if value is not None and tuple(value.shape) != (hidden,):
            raise ValueError(f"{name} has shape {tuple(value.shape)} but x has {hidden} features in its last axis: "
                             "gamma and beta hold one value per feature.")
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    variance = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1) biased: divide by hidden, not hidden - 1
    eps_here = torch.tensor(eps, dtype=x.dtype, device=x.device)  # eps as x's dtype stores it (1e-12 -> 0 in fp16)
    x_hat = (x - mean) / torch.sqrt(variance + eps_here)  # (..., hidden) mean 0, variance 1 per token
    if weight is not None:
        x_hat = x_hat * weight  # gamma
    if bias is not None:
        x_hat = x_hat + bias  # beta
    return x_hat


@dataclass(frozen=True)
class DropoutStatistics:
    """What dropout did to a tensor: how many entries it zeroed and how it scaled the survivors."""

    p: float
    elements: int  # entries that were non-zero before dropout (a zero stays zero either way)
    dropped: int
    zero_fraction: float  # dropped / elements: close to p
    standard_error: float  # sqrt(p (1 - p) / elements): the spread of zero_fraction around p by chance
    expected_scale: float  # 1 / (1 - p)
    max_scale_error: float  # max over survivors of |after / before - 1/(1-p)|, relative to 1/(1-p)


def dropout_statistics(before, after, p: float) -> DropoutStatistics:
    """Compare a tensor before and after dropout: fraction of zeros and scale of the survivors."""
    before, after = torch.as_tensor(before), torch.as_tensor(after)
    if before.shape != after.shape:
        raise ValueError(f"before has shape {tuple(before.shape)} but after has {tuple(after.shape)}: "
                         "pass the same tensor before and after dropout.")
    p = float(p)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p must be in [0, 1) (the probability of zeroing an entry), got {p}.")
    nonzero = before != 0
    if not nonzero.any():
        raise ValueError("before holds no non-zero entry: there is nothing dropout could drop.")
    if ((after != 0) & ~nonzero).any():
        raise ValueError("after is non-zero where before is zero: it is not dropout applied to before.")
    dropped = (after == 0) & nonzero
    kept = (after != 0) & nonzero
    elements, n_dropped = int(nonzero.sum()), int(dropped.sum())
    scale = 1.0 / (1.0 - p)
    ratio = after[kept].double() / before[kept].double()
    error = float(((ratio - scale).abs() / scale).max()) if kept.any() else 0.0
    return DropoutStatistics(p=p, elements=elements, dropped=n_dropped, zero_fraction=n_dropped / elements,
                             standard_error=math.sqrt(p * (1 - p) / elements), expected_scale=scale,
                             max_scale_error=error)


def part_shares(parts: EmbeddingParts) -> dict[str, torch.Tensor]:
    """Each part's share of the sum per token, <part, summed> / |summed|^2, each (batch, seq); they add up to 1."""
    summed = parts.summed  # (batch, seq, hidden)
    squared_norm = (summed * summed).sum(dim=-1)  # (batch, seq)
    if (squared_norm == 0).any():
        raise ValueError("A token's summed vector is exactly zero: its shares are undefined.")
    return {name: (getattr(parts, name) * summed).sum(dim=-1) / squared_norm for name in PART_NAMES}


def precision_tolerance(dtype: torch.dtype, scale: float, ulps: float = 8.0) -> float:
    """A tolerance of `ulps` units of the dtype's machine epsilon at magnitude `scale`: ulps * eps * scale."""
    if not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point dtype, got {dtype}.")
    if not (math.isfinite(scale) and scale >= 0) or not ulps > 0:
        raise ValueError(f"scale must be finite and >= 0 and ulps > 0, got scale={scale}, ulps={ulps}.")
    return ulps * torch.finfo(dtype).eps * scale


def compare_on_device(embeddings: nn.Module, input_ids, token_type_ids=None, device="cpu",
                      dtype: torch.dtype = torch.float32) -> float:
    """Max |difference| between the layer run on (device, dtype) and the same layer in float32 on the CPU."""
    device = torch.device(device)
    if not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point dtype such as torch.float16, got {dtype}.")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' but torch sees no CUDA device here: use device='cpu', "
                           "or run this on a machine with a GPU.")
    input_ids, token_type_ids, _ = check_embedding_inputs(embeddings, input_ids, token_type_ids)
    # Copies: .to() and .eval() act in place, and the caller's layer must stay as it is.
    reference_layer = copy.deepcopy(embeddings).to(device="cpu", dtype=torch.float32).eval()
    layer = copy.deepcopy(embeddings).to(device=device, dtype=dtype).eval()
    with torch.no_grad():
        reference = reference_layer(input_ids.cpu(), token_type_ids.cpu())  # (batch, seq, hidden) float32
        output = layer(input_ids.to(device), token_type_ids.to(device))  # (batch, seq, hidden) in dtype
    return float((output.float().cpu() - reference).abs().max())
