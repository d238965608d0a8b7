"""How the input layer differs across model families: the families, built from transformers' own classes, the
chapter's comparison tables and figures. Reading any model's input layer: input_layers.py."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch
import transformers
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from torch import nn

from helpers import validation
from helpers.input_layers import InputLayerSummary, _block_prefix
from helpers.plots import PART_COLOURS, PART_HATCHES, text_colour_on
from helpers.tables import ResultTable

__all__ = [
    "FAMILIES",
    "family_config",
    "build_family",
    "padded_position_ids",
    "factorised_embedding_parameters",
    "diagram_spec",
    "family_table",
    "family_input_diagrams",
    "family_parameter_bars",
]


# A tiny size for every family: enough to run a forward pass in milliseconds on a CPU.
_TINY = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
             max_position_embeddings=64)


@dataclass(frozen=True)
class Family:
    """One model family: its transformers classes, the released checkpoint whose shapes it uses, its source file."""

    name: str
    short: str  # a short label for tables, e.g. "RoBERTa-base"
    model_class: str  # a transformers class name, e.g. "RobertaModel"
    config_class: str  # e.g. "RobertaConfig"
    released: str  # the checkpoint whose shapes the default row shows
    source: str  # the transformers file that defines the input layer
    released_overrides: dict = field(default_factory=dict)  # where the config class defaults differ from `released`
    tiny: dict = field(default_factory=dict)  # keyword arguments of a tiny config


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in [
        # Devlin et al. 2019, https://arxiv.org/abs/1810.04805
        Family("BERT", "BERT-base", "BertModel", "BertConfig", "bert-base-uncased",
               "models/bert/modeling_bert.py", tiny=dict(_TINY, type_vocab_size=2)),
        # Liu et al. 2019, https://arxiv.org/abs/1907.11692
        # roberta-base's config.json: 514 position rows (512 + padding_idx + 1) and a single token type.
        Family("RoBERTa", "RoBERTa-base", "RobertaModel", "RobertaConfig", "roberta-base",
               "models/roberta/modeling_roberta.py",
               released_overrides=dict(max_position_embeddings=514, type_vocab_size=1),
               tiny=dict(_TINY, max_position_embeddings=66, type_vocab_size=1, pad_token_id=1)),
        # Sanh et al. 2019, https://arxiv.org/abs/1910.01108
        Family("DistilBERT", "DistilBERT-base", "DistilBertModel", "DistilBertConfig", "distilbert-base-uncased",
               "models/distilbert/modeling_distilbert.py",
               tiny=dict(vocab_size=99, dim=32, n_layers=2, n_heads=4, hidden_dim=37, max_position_embeddings=64)),
        # Lan et al. 2020, https://arxiv.org/abs/1909.11942
        # AlbertConfig() defaults are albert-xxlarge's; albert-base-v2 has BERT-base's hidden size, heads and FFN.
        Family("ALBERT", "ALBERT-base-v2", "AlbertModel", "AlbertConfig", "albert-base-v2",
               "models/albert/modeling_albert.py",
               released_overrides=dict(hidden_size=768, num_attention_heads=12, intermediate_size=3072),
               tiny=dict(_TINY, embedding_size=16, type_vocab_size=2)),
        # Clark et al. 2020, https://arxiv.org/abs/2003.10555
        Family("ELECTRA", "ELECTRA-small", "ElectraModel", "ElectraConfig", "electra-small-discriminator",
               "models/electra/modeling_electra.py", tiny=dict(_TINY, embedding_size=16, type_vocab_size=2)),
        # Raffel et al. 2020, https://arxiv.org/abs/1910.10683
        Family("T5", "T5-small", "T5Model", "T5Config", "t5-small",
               "models/t5/modeling_t5.py",
               tiny=dict(vocab_size=99, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=4)),
        # Radford et al. 2019, https://openai.com/research/better-language-models
        Family("GPT-2", "GPT-2", "GPT2Model", "GPT2Config", "gpt2",
               "models/gpt2/modeling_gpt2.py",
               tiny=dict(vocab_size=99, n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=98,
                         eos_token_id=98)),
        # Su et al. 2021, https://arxiv.org/abs/2104.09864
        Family("RoFormer", "RoFormer-base", "RoFormerModel", "RoFormerConfig", "roformer_chinese_base",
               "models/roformer/modeling_roformer.py", tiny=dict(_TINY, embedding_size=32, type_vocab_size=2)),
        # Touvron et al. 2023, https://arxiv.org/abs/2302.13971
        Family("Llama", "Llama-7B", "LlamaModel", "LlamaConfig", "Llama-7B",
               "models/llama/modeling_llama.py", tiny=dict(_TINY, num_key_value_heads=4)),
    ]
}


def _family(name: str) -> Family:
    if name not in FAMILIES:
        raise KeyError(f"unknown family {name!r}; choose one of {', '.join(FAMILIES)}.")
    return FAMILIES[name]


def family_config(name: str, tiny: bool = False, **overrides) -> transformers.PreTrainedConfig:
    """The family's config: the released checkpoint's shapes, or a tiny size (tiny=True); overrides win.

    Taught in one layer, many families, "Nine families, built from their configs"."""
    family = _family(name)
    base = family.tiny if tiny else family.released_overrides
    return getattr(transformers, family.config_class)(**{**base, **overrides})


def build_family(name: str, tiny: bool = False, seed: int = 0, **overrides) -> nn.Module:
    """A model of the family with random weights: tiny and real on the CPU, or full size on the meta device.

    A full-size model (tiny=False) is built under `torch.device("meta")`: every parameter has its shape and no
    storage, so counting a 7-billion-parameter model costs no memory. It cannot run a forward pass.

    Taught in one layer, many families, "Nine families, built from their configs".
    """
    family = _family(name)
    config = family_config(name, tiny=tiny, **overrides)
    model_class = getattr(transformers, family.model_class)
    if tiny:
        torch.manual_seed(seed)
        return model_class(config).eval()
    with torch.device("meta"):
        return model_class(config).eval()


def padded_position_ids(input_ids, padding_idx: int, past_key_values_length: int = 0) -> torch.Tensor:
    """RoBERTa's (fairseq's) position ids: padding_idx + (count of non-pad tokens so far); pads get padding_idx.

    Taught in one layer, many families, "RoBERTa: positions start at `padding_idx + 1`"."""
    padding_idx = validation.integer("padding_idx", padding_idx, minimum=0)
    past_key_values_length = validation.integer("past_key_values_length", past_key_values_length, minimum=0)
    if isinstance(input_ids, (list, tuple, Mapping)):
        input_ids = validation.ids_tensor("input_ids", input_ids)
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
    """Token-table parameters: full V*H (BERT) against factorised V*E + (E*H + H) (ALBERT's table + projection).

    Taught in one layer, many families, "ALBERT: a narrow token table and a projection"."""
    for name, value in (("vocab_size", vocab_size), ("hidden_size", hidden_size), ("embedding_size", embedding_size)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    vocab_size, hidden_size, embedding_size = int(vocab_size), int(hidden_size), int(embedding_size)
    full = vocab_size * hidden_size
    factorised = vocab_size * embedding_size + embedding_size * hidden_size + hidden_size  # table + Linear(E, H)
    return {"full": full, "factorised": factorised, "saving": full - factorised}


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
    """The dict family_input_diagrams draws for one family.

    Taught in one layer, many families, "The comparison table"."""
    return {
        "token": _shape(summary.token), "segment": summary.segment and _shape(summary.segment),
        "position": summary.position and _shape(summary.position), "norm": summary.embedding_norm,
        "projection": "→".join(map(str, summary.projection)) if summary.projection else None,
        "position_enters": summary.position_enters, "position_note": _position_note(summary),
        "blocks": blocks,
    }


_WHERE = {"added to the input": "input", "bias on attention logits": "logits", "rotates queries and keys": "rotation"}


def _norms(summary: InputLayerSummary, blocks: str) -> str:
    """The norms in a few words: the embedding norm and the blocks' placement, e.g. "embedding + post"."""
    placement = blocks.split("-norm")[0]  # "pre" or "post"
    first = "embedding + " if summary.embedding_norm else ""
    return first + placement + (" + final" if "final norm" in blocks else "")


def family_table(rows: dict[str, tuple[str, InputLayerSummary, str]], view: str = "tables"):
    """A ResultTable (Markdown in the book, plain text under 80 characters elsewhere) from {label: (weights,
    summary, block norms)}.

    view="tables": the tables' shapes and parameter counts (millions); view="positions": where position
    information enters, what carries it, and where the norms sit.

    Taught in one layer, many families, "The comparison table".
    """
    if view == "tables":
        headers = ["model", "token", "segment", "position", "input (M)", "all (M)", "share"]
        body = [[label, _shape(s.token), _shape(s.segment), _shape(s.position), f"{s.input_parameters / 1e6:,.2f}",
                 f"{s.total_parameters / 1e6:,.2f}", f"{s.input_parameters / s.total_parameters:.1%}"]
                for label, (_, s, _) in rows.items()]
    elif view == "positions":
        headers = ["model", "enters", "carried by", "params", "norms", "proj."]
        body = [[label, _WHERE.get(s.position_enters, s.position_enters),
                 (_position_note(s) or f"table {_shape(s.position)}").replace(" tables ", "× ").replace(
                     ", in block 0", ", block 0").replace("frozen sinusoids", "sinusoids"),
                 f"{s.position_parameters:,}", _norms(s, blocks),
                 "→".join(map(str, s.projection)) if s.projection else "—"]
                for label, (_, s, blocks) in rows.items()]
    else:
        raise ValueError(f"view must be 'tables' or 'positions', got {view!r}.")
    return ResultTable(headers, body)


def family_input_diagrams(families: dict[str, dict], columns: int = 1, title: str = ""):
    """One small diagram per model family: its input tables, their sum, norm, projection, and the blocks.

    Each value is a dict with keys token, segment, position (a shape string or None), norm, projection (str or
    None), position_enters ("added to the input", "bias on attention logits" or "rotates queries and keys"),
    position_note (str) and blocks (e.g. "post-norm"). Green marks where position information enters.
    One column by default: a panel 3.8 inches wide keeps its 8-pt labels legible in a phone's column.

    Taught in one layer, many families, "The comparison table".
    """
    rows = -(-len(families) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.8 * columns, 2.5 * rows), squeeze=False)
    grey = PART_COLOURS["other"]

    def box(ax, x, y, w, h, text, colour, dashed=False):
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.04", fc="white" if dashed else colour,
                                    ec=grey if dashed else "black", ls="--" if dashed else "-", lw=0.8))
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=8,
                color=grey if dashed else text_colour_on(colour))

    def arrow(ax, start, end):
        ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=8, color="black", lw=0.8))

    for ax in axes.flat:
        ax.set(xlim=(0, 10), ylim=(0, 6))
        ax.axis("off")
    for ax, (name, spec) in zip(axes.flat, families.items(), strict=False):  # spare panels stay empty
        ax.set_title(name, fontsize=10)
        slots = [("token", 4.3), ("segment", 2.6), ("position", 0.9)]
        for part, y in slots:
            shape = spec.get(part)
            label = f"{part}\n{shape}" if shape else f"no {part}\ntable"
            box(ax, 0.1, y, 2.1, 1.1, label, PART_COLOURS[part], dashed=not shape)
            if shape:
                arrow(ax, (2.25, y + 0.55), (2.62, 3.15))
        ax.add_patch(plt.Circle((2.85, 3.15), 0.25, fc="white", ec="black", lw=0.8))
        ax.text(2.85, 3.15, "+", ha="center", va="center", fontsize=10)
        x = 3.1
        for key, label in (("norm", "{}"), ("projection", "Linear\n{}")):
            if spec.get(key):
                arrow(ax, (x, 3.15), (x + 0.25, 3.15))
                box(ax, x + 0.25, 2.6, 1.65, 1.1, label.format(spec[key]), grey)
                x += 1.95
        arrow(ax, (x, 3.15), (x + 0.25, 3.15))
        left, width = x + 0.25, 9.9 - (x + 0.25)
        ax.add_patch(FancyBboxPatch((left, 0.9), width, 4.5, boxstyle="round,pad=0.04", fc="#f2f2f2", ec="black",
                                    lw=0.8))
        ax.text(left + width / 2, 5.0, "blocks", ha="center", va="center", fontsize=8, fontweight="bold")
        ax.text(left + width / 2, 4.3, spec.get("blocks", "").replace(" (", "\n(", 1), ha="center", va="center",
                fontsize=8)
        enters = spec.get("position_enters", "")
        if enters == "added to the input":
            note = "attention sees\npositions only\nthrough the input"
            ax.text(left + width / 2, 2.4, note, ha="center", va="center", fontsize=8, color=grey)
        else:
            text = "bias added to\nattention logits" if "bias" in enters else "rotate queries\nand keys"
            box(ax, left + 0.15, 1.9, width - 0.3, 1.6, text, PART_COLOURS["position"])
        if spec.get("position_note"):
            ax.text(left + width / 2, 1.35, spec["position_note"], ha="center", va="center", fontsize=8)
    handles = [FancyBboxPatch((0, 0), 1, 1, fc=PART_COLOURS[part], ec="black", lw=0.8) for part in
               ("token", "segment", "position", "other")]
    handles.append(FancyBboxPatch((0, 0), 1, 1, fc="white", ec=grey, ls="--", lw=0.8))
    labels = ["token table", "segment table", "position information", "norm, projection", "absent"]
    fig.legend(handles, labels, loc="outside lower center", ncols=2, frameon=False, fontsize=9)  # the colours' key
    if title:
        fig.suptitle(title, fontweight="bold")
    return fig


def family_parameter_bars(parts: dict[str, dict[str, int]], total_parameters: dict[str, int], title: str = ""):
    """Stacked horizontal bars: each model's input-layer parameters by part, as a share of all its parameters.

    parts maps a model to {part: count}; parts named like PART_COLOURS keys (token, segment, position) get those
    colours, every other part is drawn in the "other" grey.

    Taught in one layer, many families, "The comparison table".
    """
    names = list(parts)
    fig, ax = plt.subplots(figsize=(8.0, 0.4 * len(names) + 1.3))
    y = np.arange(len(names))
    ax.barh(y, np.ones(len(names)), color="#ececec", height=0.65)
    left = np.zeros(len(names))
    for part in ("token", "segment", "position", "other"):
        share = np.array([sum(v for k, v in parts[n].items() if (k if k in PART_COLOURS else "other") == part)
                          / total_parameters[n] for n in names])
        ax.barh(y, share, left=left, color=PART_COLOURS[part], hatch=PART_HATCHES[part], edgecolor="white", lw=0,
                height=0.65, label=f"{part} table" if part !=
                "other" else "norm and projection")
        left += share
    for i, name in enumerate(names):
        inside = sum(parts[name].values())
        ax.text(left[i] + 0.01, i, f"{left[i]:.0%}", va="center", fontsize=8)
        ax.text(1.01, i, f"{inside / 1e6:,.1f}M of {total_parameters[name] / 1e6:,.1f}M", va="center", fontsize=8)
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set(xlim=(0, 1), xlabel="share of all parameters that sit in the input layer", title=title)
    ax.xaxis.set_major_formatter(mpl.ticker.PercentFormatter(1.0))
    ax.legend(frameon=False, loc="upper center", bbox_to_anchor=(0.4, -0.16), ncols=4, fontsize=8)
    return fig
