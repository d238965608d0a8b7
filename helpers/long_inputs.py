"""Inputs longer than the position table: windows, copied or interpolated rows, and how to compare them.

Taught in "Build the layer yourself", section "My text is longer than the position table". Two ways through:
encode the text in windows that each fit the table (chunking, then pool), or give the model a longer table, its
rows copied from the trained ones as Longformer did (Beltagy et al. 2020, §5) or stretched between them (the
analogue for a learned table of position interpolation, which Chen et al. 2023 apply to rotary position indices).
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from helpers.validation import check_allocation, ids_tensor, integer

__all__ = ["copied_rows", "interpolated_rows", "with_position_table", "encode_in_windows", "encode_masked",
           "token_distance"]


def _table(table) -> torch.Tensor:
    """A position table as a (positions, hidden) floating-point tensor, or a clear error."""
    if not isinstance(table, torch.Tensor):
        raise TypeError(f"table must be a (positions, hidden) tensor, e.g. "
                        f"model.embeddings.position_embeddings.weight, got {type(table).__name__}.")
    if table.dim() != 2 or 0 in table.shape or not table.is_floating_point():
        raise ValueError(f"table must be a non-empty floating-point (positions, hidden) tensor, got shape "
                         f"{tuple(table.shape)} and dtype {table.dtype}.")
    return table.detach()


def _length(length, table: torch.Tensor) -> int:
    length = integer("length", length, minimum=1, hint=": the number of rows the new table needs")
    check_allocation("the new position table", (length, table.shape[1]), table.element_size())
    return length


def copied_rows(table: torch.Tensor, length: int, first: int = 0) -> torch.Tensor:
    """(positions, hidden) -> (length, hidden): the table, then its rows first..positions-1 over and over.

    first=0 is Longformer's copy; first=1 leaves row 0 (the row only [CLS] ever held) out of the copies.
    """
    table = _table(table)
    length = _length(length, table)
    n = table.shape[0]
    first = integer("first", first, minimum=0, hint=f": a row of the {n}-row table to start each copy at")
    if first >= n:
        raise ValueError(f"first must be a row of the {n}-row table, got {first}.")
    j = torch.arange(length)
    index = torch.where(j < n, j, first + (j - n) % (n - first))  # (length,)
    return table[index].clone()  # (length, hidden)


def interpolated_rows(table: torch.Tensor, length: int) -> torch.Tensor:
    """(positions, hidden) -> (length, hidden): row j lies at j * (positions - 1) / (length - 1) on the old rows."""
    table = _table(table)
    length = _length(length, table)
    if table.shape[0] < 2 or length < 2:
        raise ValueError(f"interpolation needs at least 2 old and 2 new rows, got {table.shape[0]} and {length}.")
    stretched = F.interpolate(table.T[None], size=length, mode="linear", align_corners=True)  # (1, hidden, length)
    return stretched[0].T.contiguous()  # (length, hidden)


def _twin(module: nn.Module) -> nn.Module:
    """A new module object holding the same submodules, parameters and buffers: replacing one leaves the original."""
    twin = copy.copy(module)
    twin._modules, twin._parameters, twin._buffers = (dict(module._modules), dict(module._parameters),
                                                      dict(module._buffers))
    return twin


def with_position_table(model: nn.Module, table: torch.Tensor) -> nn.Module:
    """A BERT model sharing every weight with `model` but its position table, which is `table`; `model` is untouched.

    Only the new table is allocated: the encoder, the token and segment tables and the LayerNorm are shared.
    """
    embeddings = getattr(model, "embeddings", None)
    if not isinstance(getattr(embeddings, "position_embeddings", None), nn.Embedding):
        raise TypeError(f"model must be a BERT model with embeddings.position_embeddings (load_bert()'s model), "
                        f"got {type(model).__name__}.")
    table = _table(table)
    if table.shape[1] != embeddings.position_embeddings.embedding_dim:
        raise ValueError(f"table has {table.shape[1]} columns but the model's hidden size is "
                         f"{embeddings.position_embeddings.embedding_dim}.")
    rows = table.shape[0]
    longer, longer_embeddings = _twin(model), _twin(embeddings)
    longer_embeddings.position_embeddings = nn.Embedding.from_pretrained(table.clone(), freeze=False)
    longer_embeddings.position_embeddings.train(embeddings.training)
    longer_embeddings.position_ids = torch.arange(rows).unsqueeze(0)  # (1, rows): the default positions
    longer_embeddings.token_type_ids = torch.zeros(1, rows, dtype=torch.long)  # (1, rows): segment A
    longer.embeddings = longer_embeddings
    longer.config = copy.deepcopy(model.config)
    longer.config.max_position_embeddings = rows
    return longer


def encode_in_windows(model: nn.Module, ids, cls_id: int, sep_id: int, window: int | None = None) -> torch.Tensor:
    """(length,) ids without special tokens -> (length, hidden) last-layer states.

    Each window of `window - 2` ids is wrapped in [CLS] ... [SEP] and encoded on its own; window=None encodes
    all ids in one input.
    """
    ids = ids_tensor("ids", ids)
    if ids.shape[0] != 1:
        raise ValueError(f"ids must be one text's ids, shape (length,), got shape {tuple(ids.shape)}.")
    ids = ids[0]
    cls_id, sep_id = integer("cls_id", cls_id, minimum=0), integer("sep_id", sep_id, minimum=0)
    step = ids.shape[0] if window is None else integer("window", window, minimum=3,
                                                       hint=": [CLS], [SEP] and at least one token") - 2
    states = []
    with torch.no_grad():
        for piece in ids.split(step):
            wrapped = torch.cat([torch.tensor([cls_id]), piece, torch.tensor([sep_id])])  # (n + 2,)
            states.append(model(wrapped.unsqueeze(0)).last_hidden_state[0, 1:-1])  # (n, hidden)
    return torch.cat(states)  # (length, hidden)


def encode_masked(model: nn.Module, ids, states: torch.Tensor, low: int, high: int, cls_id: int, sep_id: int,
                  window: int | None = None) -> torch.Tensor:
    """The last-layer states of every id outside ids[low:high], with those ids hidden from attention.

    The input, its positions and its windows stay as they are; only the attention mask changes: the band's ids
    get mask 0, so no other token reads them, and their own states are left out. `states` are
    encode_in_windows(model, ids, cls_id, sep_id, window): the windows that do not overlap the band are reused,
    windows wholly inside it are dropped, and only the windows that straddle an edge are encoded again.
    """
    ids = ids_tensor("ids", ids)[0]
    step = len(ids) if window is None else integer("window", window, minimum=3, hint=": [CLS], [SEP] and "
                                                   "at least one token") - 2
    low, high = integer("low", low, minimum=0), integer("high", high, minimum=0)
    if not low < high <= len(ids):
        raise ValueError(f"need 0 <= low < high <= {len(ids)} (the ids' length), got low={low}, high={high}.")
    if not isinstance(states, torch.Tensor) or states.dim() != 2 or len(states) != len(ids):
        raise ValueError(f"states must be the ({len(ids)}, hidden) states of encode_in_windows on these ids, got "
                         f"{type(states).__name__} of shape {tuple(getattr(states, 'shape', ()))}.")
    kept = []
    for start in range(0, len(ids), step):
        end = min(start + step, len(ids))
        if end <= low or start >= high:  # the band is not in this window
            kept.append(states[start:end])
        elif start < low or end > high:  # an edge of the band: hide its part
            inside = (torch.arange(start, end) >= low) & (torch.arange(start, end) < high)  # (n,)
            wrapped = torch.cat([torch.tensor([cls_id]), ids[start:end], torch.tensor([sep_id])])  # (n + 2,)
            mask = torch.cat([torch.tensor([True]), ~inside, torch.tensor([True])]).long()  # (n + 2,)
            with torch.no_grad():
                out = model(wrapped.unsqueeze(0), attention_mask=mask.unsqueeze(0)).last_hidden_state[0, 1:-1]
            kept.append(out[~inside])
    return torch.cat(kept)  # (length - (high - low), hidden)


def token_distance(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """(length, hidden) twice -> (length,): 1 - cosine similarity of each pair of rows."""
    if not (isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor)):
        raise TypeError("token_distance compares two (length, hidden) tensors.")
    if first.shape != second.shape or first.dim() != 2:
        raise ValueError(f"token_distance needs two (length, hidden) tensors of one shape, got "
                         f"{tuple(first.shape)} and {tuple(second.shape)}.")
    return 1 - F.cosine_similarity(first, second, dim=-1)
