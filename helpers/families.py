"""How the input layer differs across model families, read from transformers' own classes."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch
import transformers
from torch import nn
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from helpers.tables import ResultTable

__all__ = [
    "Family",
    "FAMILIES",
    "InputLayerSummary",
    "family_config",
    "build_family",
    "input_layer_summary",
    "block_norm_placement",
    "first_block_input",
    "position_reaches_input",
    "padded_position_ids",
    "factorised_embedding_parameters",
    "rotary_scores",
    "offset_residual",
    "diagram_spec",
    "family_table",
]

# A tiny size for every family: enough to run a forward pass in milliseconds on a CPU.
_TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
             max_position_embeddings=64)


@dataclass(frozen=True)
class Family:
    """One model family: its transformers classes, the released checkpoint whose shapes it uses, and sources."""

    name: str
    short: str  # a short label for tables, e.g. "RoBERTa-base"
    model_class: str  # a transformers class name, e.g. "RobertaModel"
    config_class: str  # e.g. "RobertaConfig"
    released: str  # the checkpoint whose shapes the default row shows
    source: str  # the transformers file that defines the input layer
    paper: str
    released_overrides: dict = field(default_factory=dict)  # where the config class defaults differ from `released`
    tiny: dict = field(default_factory=dict)  # keyword arguments of a tiny config


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in [
        Family("BERT", "BERT-base", "BertModel", "BertConfig", "bert-base-uncased",
               "models/bert/modeling_bert.py", "Devlin et al. 2019, https://arxiv.org/abs/1810.04805",
               tiny=dict(_TINY, type_vocab_size=2)),
        # roberta-base's config.json: 514 position rows (512 + padding_idx + 1) and a single token type.
        Family("RoBERTa", "RoBERTa-base", "RobertaModel", "RobertaConfig", "roberta-base",
               "models/roberta/modeling_roberta.py", "Liu et al. 2019, https://arxiv.org/abs/1907.11692",
               released_overrides=dict(max_position_embeddings=514, type_vocab_size=1),
               tiny=dict(_TINY, max_position_embeddings=66, type_vocab_size=1, pad_token_id=1)),
        Family("DistilBERT", "DistilBERT-base", "DistilBertModel", "DistilBertConfig", "distilbert-base-uncased",
               "models/distilbert/modeling_distilbert.py", "Sanh et al. 2019, https://arxiv.org/abs/1910.01108",
               tiny=dict(vocab_size=99, dim=32, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=64)),
        # AlbertConfig() defaults are albert-xxlarge's; albert-base-v2 has BERT-base's hidden size, heads and FFN.
        Family("ALBERT", "ALBERT-base-v2", "AlbertModel", "AlbertConfig", "albert-base-v2",
               "models/albert/modeling_albert.py", "Lan et al. 2020, https://arxiv.org/abs/1909.11942",
               released_overrides=dict(hidden_size=768, num_attention_heads=12, intermediate_size=3072),
               tiny=dict(_TINY, embedding_size=16, type_vocab_size=2)),
        Family("ELECTRA", "ELECTRA-small", "ElectraModel", "ElectraConfig", "electra-small-discriminator",
               "models/electra/modeling_electra.py", "Clark et al. 2020, https://arxiv.org/abs/2003.10555",
               tiny=dict(_TINY, embedding_size=16, type_vocab_size=2)),
        Family("T5", "T5-small", "T5Model", "T5Config", "t5-small",
               "models/t5/modeling_t5.py", "Raffel et al. 2020, https://arxiv.org/abs/1910.10683",
               tiny=dict(vocab_size=99, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=4)),
        Family("GPT-2", "GPT-2", "GPT2Model", "GPT2Config", "gpt2",
               "models/gpt2/modeling_gpt2.py", "Radford et al. 2019, https://openai.com/research/better-language-models",
               tiny=dict(vocab_size=99, n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=98,
                         eos_token_id=98)),
        Family("RoFormer", "RoFormer-base", "RoFormerModel", "RoFormerConfig", "roformer_chinese_base",
               "models/roformer/modeling_roformer.py", "Su et al. 2021, https://arxiv.org/abs/2104.09864",
               tiny=dict(_TINY, embedding_size=32, type_vocab_size=2)),
        Family("Llama", "Llama-7B", "LlamaModel", "LlamaConfig", "Llama-7B",
               "models/llama/modeling_llama.py", "Touvron et al. 2023, https://arxiv.org/abs/2302.13971",
               tiny=dict(_TINY, num_key_value_heads=4)),
    ]
}


def _family(name: str) -> Family:
    if name not in FAMILIES:
        raise KeyError(f"unknown family {name!r}; choose one of {', '.join(FAMILIES)}.")
    return FAMILIES[name]


def family_config(name: str, tiny: bool = False, **overrides) -> transformers.PreTrainedConfig:
    """The family's config: the released checkpoint's shapes, or a tiny size (tiny=True); overrides win."""
    family = _family(name)
    base = family.tiny if tiny else family.released_overrides
    return getattr(transformers, family.config_class)(**{**base, **overrides})


def build_family(name: str, tiny: bool = False, seed: int = 0, **overrides) -> nn.Module:
    """A model of the family with random weights: tiny and real on the CPU, or full size on the meta device.

    A full-size model (tiny=False) is built under `torch.device("meta")`: every parameter has its shape and no
    storage, so counting a 7-billion-parameter model costs no memory. It cannot run a forward pass.
    """
    family = _family(name)
    config = family_config(name, tiny=tiny, **overrides)
    model_class = getattr(transformers, family.model_class)
    if tiny:
        torch.manual_seed(seed)
        return model_class(config).eval()
    with torch.device("meta"):
        return model_class(config).eval()


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
    module_names: dict[str, str]  # role -> module name, e.g. {"token": "embeddings.word_embeddings"}


def input_layer_summary(model: nn.Module) -> InputLayerSummary:
    """Describe a transformers model's input layer from its modules (works on the meta device)."""
    if not isinstance(model, transformers.PreTrainedModel):
        raise TypeError(
            f"expected a transformers model (PreTrainedModel), got {type(model).__name__}. "
            "Build one with build_family(name) or load one with load_bert()."
        )
    token = model.get_input_embeddings()
    names = {"token": next(name for name, module in model.named_modules() if module is token)}
    segment = position = projection = norm = None
    position_modules: dict[str, tuple[int, ...]] = {}
    enters = set()
    carriers = []
    for name, module in model.named_modules():
        last = name.rsplit(".", 1)[-1]
        kind = type(module).__name__
        if isinstance(module, nn.Embedding) and "token_type" in last:
            segment, names["segment"] = module, name
        elif isinstance(module, nn.Embedding) and last in ("position_embeddings", "wpe"):
            position, names["position"] = module, name
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
            projection, names["projection"] = module, name
        elif _is_norm(module) and "embeddings" in name.split("."):
            norm, names["embedding_norm"] = module, name
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
        module_names=names,
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
    """The hidden states the first block receives (its first argument); shape (batch, seq, hidden)."""
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
    """True when the first block's input differs between positions for one token repeated `length` times."""
    states = first_block_input(model, torch.full((1, length), token_id))[0]  # (length, hidden)
    return not torch.allclose(states, states[:1].expand_as(states), atol=1e-6, rtol=0.0)


def padded_position_ids(input_ids, padding_idx: int, past_key_values_length: int = 0) -> torch.Tensor:
    """RoBERTa's (fairseq's) position ids: padding_idx + (count of non-pad tokens so far); pads get padding_idx."""
    input_ids = torch.as_tensor(input_ids)
    if input_ids.dtype.is_floating_point or input_ids.dtype == torch.bool or input_ids.dim() != 2:
        raise ValueError(
            f"input_ids must be integer ids of shape (batch, seq), got dtype {input_ids.dtype} and shape "
            f"{tuple(input_ids.shape)}."
        )
    real = input_ids != padding_idx  # (batch, seq)
    counted = torch.cumsum(real.long(), dim=1) + past_key_values_length  # 1, 2, 3, ... over real tokens
    return torch.where(real, counted + padding_idx, torch.full_like(counted, padding_idx))


def factorised_embedding_parameters(vocab_size: int, hidden_size: int, embedding_size: int) -> dict[str, int]:
    """Token-table parameters: full V*H (BERT) against factorised V*E + (E*H + H) (ALBERT's table + projection)."""
    for name, value in (("vocab_size", vocab_size), ("hidden_size", hidden_size), ("embedding_size", embedding_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    full = vocab_size * hidden_size
    factorised = vocab_size * embedding_size + embedding_size * hidden_size + hidden_size  # table + Linear(E, H)
    return {"full": full, "factorised": factorised, "saving": full - factorised}


def rotary_scores(query: torch.Tensor, key: torch.Tensor, num_positions: int, base: float = 10000.0) -> torch.Tensor:
    """S[m, n] = <RoPE(query, m), RoPE(key, n)> with transformers' Llama rotary code; shape (positions, positions).

    The same query vector is placed at every position m and the same key vector at every position n.
    """
    query, key = torch.as_tensor(query, dtype=torch.float32), torch.as_tensor(key, dtype=torch.float32)
    if query.dim() != 1 or query.shape != key.shape or query.shape[0] % 2:
        raise ValueError(
            f"query and key must be 1-D vectors of one even length (the head size), got {tuple(query.shape)} "
            f"and {tuple(key.shape)}: rotary encodings rotate pairs of dimensions."
        )
    head_dim = query.shape[0]
    config = transformers.LlamaConfig(hidden_size=head_dim, num_attention_heads=1, head_dim=head_dim,
                                      max_position_embeddings=num_positions,
                                      rope_parameters={"rope_type": "default", "rope_theta": float(base)})
    rotary = LlamaRotaryEmbedding(config)
    positions = torch.arange(num_positions)[None, :]  # (1, positions)
    cos, sin = rotary(query[None, None, None, :], positions)  # each (1, positions, head_dim)
    q = query.expand(1, 1, num_positions, head_dim)  # (batch, heads, positions, head_dim)
    k = key.expand(1, 1, num_positions, head_dim)
    q_rot, k_rot = apply_rotary_pos_emb(q, k, cos, sin)
    return (q_rot[0, 0] @ k_rot[0, 0].T).double()  # (positions, positions)


def offset_residual(scores: torch.Tensor) -> torch.Tensor:
    """Each entry minus the mean of its diagonal (one offset); all zero iff the scores depend on the offset only."""
    if not isinstance(scores, torch.Tensor) or scores.dim() != 2 or scores.shape[0] != scores.shape[1]:
        shape = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise ValueError(f"scores must be a square 2-D tensor (query positions, key positions), got {shape}.")
    n = scores.shape[0]
    offsets = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # (n, n): key position - query position
    sums = torch.zeros(2 * n - 1, dtype=scores.dtype).index_add_(0, (offsets + n - 1).reshape(-1), scores.reshape(-1))
    counts = n - (torch.arange(2 * n - 1) - (n - 1)).abs()  # entries on each diagonal, offsets -(n-1) .. n-1
    means = sums / counts
    return scores - means[offsets + n - 1]  # (n, n)


def _shape(shape) -> str:
    return "×".join(str(s) for s in shape) if shape else "—"


def _position_note(summary: InputLayerSummary) -> str:
    """Where the position information lives when it is not a table added to the input."""
    if summary.position is not None:
        return ""
    if not any(summary.position_modules.values()):
        return "computed, no table"
    tables = {name: shape for name, shape in summary.position_modules.items() if shape}
    text = " + ".join(sorted({_shape(shape) for shape in tables.values()}))
    if len(tables) > 1:
        first_only = all((_block_prefix(name) or "").endswith(".0") for name in tables)
        return f"{len(tables)} tables {text}" + (", in block 0" if first_only else "")
    return f"frozen sinusoids {text}" if summary.position_parameters == 0 else f"table {text}"


def diagram_spec(summary: InputLayerSummary, blocks: str) -> dict:
    """The dict family_input_diagrams draws for one family."""
    return {
        "token": _shape(summary.token), "segment": summary.segment and _shape(summary.segment),
        "position": summary.position and _shape(summary.position), "norm": summary.embedding_norm,
        "projection": "→".join(map(str, summary.projection)) if summary.projection else None,
        "position_enters": summary.position_enters, "position_note": _position_note(summary),
        "blocks": blocks,
    }


def family_table(rows: dict[str, tuple[str, InputLayerSummary, str]], view: str = "tables"):
    """A ResultTable (Markdown in the book, plain text elsewhere) from {label: (weights, summary, block norms)}.

    view="tables": the tables, their shapes and parameter counts; view="positions": where position information
    enters and where the norms sit.
    """
    if view == "tables":
        headers = ["model", "weights", "token", "segment", "position", "input-layer params", "all params",
                   "input share"]
        body = [[label, weights, _shape(s.token), _shape(s.segment), _shape(s.position), f"{s.input_parameters:,}",
                 f"{s.total_parameters:,}", f"{s.input_parameters / s.total_parameters:.1%}"]
                for label, (weights, s, _) in rows.items()]
    elif view == "positions":
        headers = ["model", "position enters", "carried by", "trainable position params", "embedding norm",
                   "projection", "blocks"]
        body = [[label, s.position_enters, _position_note(s) or f"table {_shape(s.position)}",
                 f"{s.position_parameters:,}", s.embedding_norm or "—",
                 "→".join(map(str, s.projection)) if s.projection else "—", blocks]
                for label, (_, s, blocks) in rows.items()]
    else:
        raise ValueError(f"view must be 'tables' or 'positions', got {view!r}.")
    return ResultTable(headers, body)
