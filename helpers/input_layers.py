"""What any transformers model's input layer holds, and where position information and the norms enter: read from
its modules, and from one forward pass with hooks (the families are in families.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
import transformers
from torch import nn

from helpers import validation

__all__ = ["input_layer_summary", "block_norm_placement", "first_block_input", "position_reaches_input",
           "attention_terms", "position_score_properties"]


def _is_norm(module: nn.Module) -> bool:
    return type(module).__name__.endswith("Norm")  # LayerNorm, T5LayerNorm, LlamaRMSNorm, ...


def _is_linear(module: nn.Module) -> bool:
    return type(module).__name__ in ("Linear", "Conv1D")  # GPT-2's projections are transformers' Conv1D


def _count(modules) -> int:
    seen, total = set(), 0
    for module in modules:
        for parameter in module.parameters():
            if id(parameter) not in seen:
                seen.add(id(parameter))
                total += parameter.numel()
    return total


def _trainable(modules) -> int:
    seen, total = set(), 0
    for module in modules:
        for parameter in module.parameters():
            if id(parameter) not in seen and parameter.requires_grad:
                seen.add(id(parameter))
                total += parameter.numel()
    return total


@dataclass
class InputLayerSummary:
    """What a model's input layer holds, found by module attributes; shapes are (rows, width)."""

    token: tuple[int, int]
    segment: tuple[int, int] | None
    position: tuple[int, int] | None  # a table whose rows are added to the input
    position_enters: str  # "added to the input", "bias on attention logits" or "rotates queries and keys"
    position_modules: dict[str, tuple[int, ...]]  # every module carrying position information -> weight shape
    position_parameters: int  # trainable parameters that carry position information
    projection: tuple[int, int] | None  # (in, out) of a Linear from the embedding width to the hidden width
    embedding_norm: str | None  # class name of the norm applied to the summed embeddings
    input_parameters: int  # token, segment and position tables, embedding norm and projection
    parts: dict[str, int]  # parameters per part of the input layer: token, segment, position, norm, projection
    total_parameters: int


def input_layer_summary(model: nn.Module) -> InputLayerSummary:
    """Describe a transformers model's input layer from its modules (works on the meta device).

    Taught in one layer, many families, "The comparison table"."""
    if not isinstance(model, transformers.PreTrainedModel):
        raise TypeError(
            f"expected a transformers model (PreTrainedModel), got {type(model).__name__}. "
            "Build one with build_family(name) or load one with load_bert()."
        )
    token = model.get_input_embeddings()
    segment = position = projection = norm = None
    position_modules: dict[str, tuple[int, ...]] = {}
    enters = set()
    carriers = []
    for name, module in model.named_modules():
        last = name.rsplit(".", 1)[-1]
        kind = type(module).__name__
        if isinstance(module, nn.Embedding) and "token_type" in last:
            segment = module
        elif isinstance(module, nn.Embedding) and last in ("position_embeddings", "wpe"):
            position = module
            position_modules[name] = tuple(module.weight.shape)
            enters.add("added to the input")
            carriers.append(module)
        elif last == "relative_attention_bias":
            position_modules[name] = tuple(module.weight.shape)
            enters.add("bias on attention logits")
            carriers.append(module)
        elif "Rotary" in kind or kind == "RoFormerSinusoidalPositionalEmbedding":
            position_modules[name] = tuple(module.weight.shape) if hasattr(module, "weight") else ()
            enters.add("rotates queries and keys")
            carriers.append(module)
        elif _is_linear(module) and last in ("embeddings_project", "embedding_hidden_mapping_in"):
            projection = module
        elif _is_norm(module) and "embeddings" in name.split("."):
            norm = module
    if len(enters) != 1:
        raise ValueError(f"{type(model).__name__}: expected one way for positions to enter, found {sorted(enters)}.")
    modules = {"token": token, "segment": segment, "position": position, "norm": norm, "projection": projection}
    parts = [m for m in modules.values() if m is not None]
    return InputLayerSummary(
        token=tuple(token.weight.shape),
        segment=tuple(segment.weight.shape) if segment is not None else None,
        position=tuple(position.weight.shape) if position is not None else None,
        position_enters=enters.pop(),
        position_modules=position_modules,
        position_parameters=_trainable(carriers),
        projection=(projection.weight.shape[1], projection.weight.shape[0]) if projection is not None else None,
        embedding_norm=type(norm).__name__ if norm is not None else None,
        input_parameters=_count(parts),
        parts={role: _count([module]) if module is not None else 0 for role, module in modules.items()},
        total_parameters=_count([model]),
    )


def _example_inputs(model: nn.Module, input_ids: torch.Tensor) -> dict:
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
    if getattr(model.config, "is_encoder_decoder", False):
        inputs["decoder_input_ids"] = input_ids
    return inputs


def _check_runnable(model: nn.Module) -> None:
    parameter = next(model.parameters())
    if parameter.is_meta:
        raise ValueError(
            "this model lives on the meta device (shapes without values) and cannot run a forward pass; "
            "build a tiny one with build_family(name, tiny=True)."
        )


def _block_prefix(name: str) -> str | None:
    """'encoder.layer.0.attention.self.query' -> 'encoder.layer.0': the path up to the first layer index."""
    match = re.match(r"^(.*?\.\d+)(\.|$)", name)
    return match.group(1) if match else None


def _call_order(model: nn.Module, input_ids: torch.Tensor) -> list[str]:
    order: list[str] = []
    hooks = [
        module.register_forward_pre_hook(lambda _m, _a, name=name: order.append(name))
        for name, module in model.named_modules()
        if _is_linear(module) or _is_norm(module)
    ]
    try:
        with torch.no_grad():
            model(**_example_inputs(model, input_ids))
    finally:
        for hook in hooks:
            hook.remove()
    return order


def block_norm_placement(model: nn.Module) -> str:
    """'post-norm' or 'pre-norm' (+ ', final norm'): whether the first block normalises before its first projection.

    Found by running the model once with hooks that record the order in which Linear and norm modules are called.

    Taught in one layer, many families, "The comparison table".
    """
    _check_runnable(model)
    order = _call_order(model, torch.arange(4)[None, :] % model.config.vocab_size)
    named = dict(model.named_modules())
    first = next(name for name in order if _is_linear(named[name]) and _block_prefix(name))
    block = _block_prefix(first)
    before = order[: order.index(first)]
    pre = any(_is_norm(named[name]) and name.startswith(block + ".") for name in before)
    kind = sorted({type(named[name]).__name__ for name in order if _is_norm(named[name]) and _block_prefix(name)})
    last_block_call = max(i for i, name in enumerate(order) if _block_prefix(name))
    final = any(_is_norm(named[name]) and not _block_prefix(name) for name in order[last_block_call + 1:])
    return f"{'pre' if pre else 'post'}-norm ({', '.join(kind)})" + (", final norm" if final else "")


def first_block_input(model: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """The hidden states the first block receives (its first argument); shape (batch, seq, hidden).

    Taught in one layer, many families, "The comparison table"."""
    input_ids = validation.model_ids("input_ids", input_ids, model, "first_block_input")  # (batch, seq)
    _check_runnable(model)
    named = dict(model.named_modules())
    first = next(name for name in _call_order(model, input_ids) if _is_linear(named[name]) and _block_prefix(name))
    captured = []

    def grab(_module, args, kwargs):
        captured.append(args[0] if args else kwargs["hidden_states"])

    hook = named[_block_prefix(first)].register_forward_pre_hook(grab, with_kwargs=True)
    try:
        with torch.no_grad():
            model(**_example_inputs(model, input_ids))
    finally:
        hook.remove()
    return captured[0]


def position_reaches_input(model: nn.Module, token_id: int = 5, length: int = 6) -> bool:
    """True when the first block's input differs between positions for one token repeated `length` times.

    Taught in one layer, many families, "The comparison table"."""
    token_id = validation.integer("token_id", token_id, minimum=0, hint=" (a row of the model's token table)")
    length = validation.integer("length", length, minimum=2, hint=" (tokens, so that positions can differ)")
    validation.check_fits_model(model, "position_reaches_input", f"the input (token_id={token_id}, length={length})",
                                (1, length), (token_id, token_id))
    states = first_block_input(model, torch.full((1, length), token_id))[0]  # (length, hidden)
    return not torch.allclose(states, states[:1].expand_as(states), atol=1e-6, rtol=0.0)


def _heads(vectors: torch.Tensor, linear: nn.Linear, heads: int, with_bias: bool) -> torch.Tensor:
    """(tokens, hidden) through a query or key projection, split into heads: (heads, tokens, head_dim)."""
    out = vectors @ linear.weight.T + (linear.bias if with_bias else 0)
    return out.view(vectors.shape[0], heads, -1).transpose(0, 1)


def _position_ids(position_ids, embeddings: nn.Module, tokens: int) -> torch.Tensor:
    """position_ids as (tokens,), one per token, each a row of the position table."""
    position_ids = validation.ids_tensor("position_ids", position_ids)  # (1, tokens)
    rows = embeddings.position_embeddings.num_embeddings
    if tuple(position_ids.shape) != (1, tokens):
        raise ValueError(f"position_ids has shape {tuple(position_ids.shape)}: pass one position per token, shape "
                         f"({tokens},) or (1, {tokens}).")
    if int(position_ids.min()) < 0 or int(position_ids.max()) >= rows:
        raise ValueError(f"position_ids must lie in 0..{rows - 1} (the position table's rows), got "
                         f"{int(position_ids.min())}..{int(position_ids.max())}.")
    return position_ids[0]


def attention_terms(model: nn.Module, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None) -> dict:
    """Layer 0's attention logits of a BERT split as in TUPE (Ke et al. 2021, section 3): word-word, word-position,
    position-word, position-position, and the rest (LayerNorm's shift and the projections' biases).

    LayerNorm(w + p) = gamma (w - mean w) / s + gamma (p - mean p) / s + beta, with s the sum's own standard
    deviation per token, splits exactly; each term is (heads, tokens, tokens), float32; "all" is their sum.

    Taught in one layer, many families, "How position enters attention, on real weights"."""
    validation.check_embeddings(validation.whole_model(model, "attention_terms").embeddings, "attention_terms")
    input_ids = validation.model_ids("input_ids", input_ids, model, "attention_terms", position_ids is None)
    if input_ids.shape[0] != 1:
        raise ValueError(f"input_ids must have shape (1, tokens) or (tokens,), got {tuple(input_ids.shape)}: "
                         "pass one sequence at a time.")
    emb, ids = model.embeddings, input_ids[0]  # (tokens,)
    positions = torch.arange(len(ids)) if position_ids is None else _position_ids(position_ids, emb, len(ids))
    with torch.no_grad():
        word = emb.word_embeddings(ids) + emb.token_type_embeddings(torch.zeros_like(ids))  # type 0 goes with word
        position = emb.position_embeddings(positions)
        total = word + position
        spread = (total.var(-1, unbiased=False, keepdim=True) + emb.LayerNorm.eps).sqrt()  # (tokens, 1)
        gamma = emb.LayerNorm.weight
        parts = {"word": gamma * (word - word.mean(-1, keepdim=True)) / spread,
                 "position": gamma * (position - position.mean(-1, keepdim=True)) / spread}
        attention = model.encoder.layer[0].attention.self
        heads = attention.num_attention_heads
        q = {n: _heads(v, attention.query, heads, False) for n, v in parts.items()}
        k = {n: _heads(v, attention.key, heads, False) for n, v in parts.items()}
        rest = emb.LayerNorm.bias.expand_as(word)
        q_rest, k_rest = _heads(rest, attention.query, heads, True), _heads(rest, attention.key, heads, True)
        scale = q_rest.shape[-1] ** -0.5
        terms = {f"{a}-{b}": q[a] @ k[b].transpose(1, 2) * scale for a in parts for b in parts}
        q_all, k_all = sum(q.values()) + q_rest, sum(k.values()) + k_rest
        terms["rest"] = q_all @ k_all.transpose(1, 2) * scale - sum(terms.values())
        terms["all"] = q_all @ k_all.transpose(1, 2) * scale
    return terms


def position_score_properties(scores: torch.Tensor, max_offset: int = 20) -> dict[str, float]:
    """Wang et al. 2021's properties of a (positions, positions) score matrix phi(x, y), at the attention level:

    translation: share of phi's variance explained by the offset y - x alone (1: phi depends only on the offset);
    monotonicity: share of steps 1..max_offset, both directions, where phi falls as |y - x| grows (1: always);
    symmetry: correlation of phi(x, y) with phi(y, x) off the diagonal (1: symmetric).

    Taught in one layer, many families, "How position enters attention, on real weights"."""
    from helpers.sinusoids import offset_residual  # taught in the sinusoid chapter

    max_offset = validation.integer("max_offset", max_offset, minimum=1, hint=" (an offset between positions)")
    scores = validation.numbers_tensor("scores", scores, "attention scores (positions, positions)").double()
    n = scores.shape[0] if scores.dim() else 0
    if scores.dim() != 2 or n != scores.shape[1] or n <= max_offset + 1:
        raise ValueError(f"scores must be square with more than {max_offset + 1} positions, got {tuple(scores.shape)}: "
                         "pass one head's (positions, positions) scores, e.g. attention_terms(...)['all'][0].")
    if not torch.isfinite(scores).all():
        raise ValueError("scores hold NaN or infinite values: these properties need finite scores.")
    translation = 1 - offset_residual(scores).var() / scores.var()
    falls = []
    for matrix in (scores, scores.T):  # keys after the query, then keys before it
        rows = torch.arange(n - max_offset - 1)[:, None]
        steps = matrix[rows, rows + torch.arange(1, max_offset + 2)]  # (queries, offsets 1..max_offset+1)
        falls.append((steps[:, 1:] < steps[:, :-1]).double().mean())
    off = ~torch.eye(n, dtype=torch.bool)
    symmetry = torch.corrcoef(torch.stack([scores[off], scores.T[off]]))[0, 1]
    return {"translation": float(translation), "monotonicity": float(sum(falls) / 2), "symmetry": float(symmetry)}
