"""What the chapters of "BERT's First Vectors" import: one module per concept, named after the chapter that teaches it.

    checkpoint          load_bert(): the checkpoint the book runs on, hash-checked (every chapter)
    anatomy             the layer taken apart: checked inputs, three lookups, their sum (the layer at a glance)
    tokens              WordPiece, token tables, nearest tokens (token embeddings)
    token_figures       the token chapter's figures
    segments            segment rows and swaps (segment embeddings)
    positions           learned-position analyses and probes (learned positions)
    position_figures    the learned-position chapter's figures
    position_rows       one position row against its table; a one-column read-out (learned positions)
    layernorm           LayerNorm by hand, dropout, shares of the sum, precision, their figures (the sum and LayerNorm)
    sinusoids           sinusoidal tables, rotations, rotary scores, their figures (sinusoidal encodings; families)
    relative_positions  T5's relative-position buckets and ALiBi's slopes, their figures (relative positions: T5)
    families            the relatives, built from transformers' own classes; tables, figures (one layer, many families)
    input_layers        any model's input layer read from its modules and hooks (one layer, many families)
    scratch             BERT's embedding layer built from torch.nn parts (build it yourself; train it)
    long_inputs         texts longer than the position table: windows, copied or interpolated rows (build it yourself)
    long_retrieval      scoring the ways through: held-out sentences, band contrast, paired intervals (build it)
    position_schemes    six position schemes, encoder or decoder, as switches in a tiny transformer (train it)
    training            order tasks, the training loop, the test-time controls, the seed sweep (train it)
    position_stats      scoring past L, paired intervals over seeds and rows, Holm, the claim rule (train it)
    train_figures       accuracy at every position for every scheme; the learned rows' norms (train it)
    pretraining         a tiny BertForMaskedLM pre-trained on scikit-learn's prose, its sweep (pre-train a tiny BERT)
    pretraining_controls the positive control for order use: text only position predicts (pre-train a tiny BERT)
    pretraining_stats   a position table's band and curve measures, paired tests over seeds (pre-train a tiny BERT)
    pretraining_figures the pre-training chapter's figures (pre-train a tiny BERT)
    findings            a claim about trained weights, stated for the checkpoint that ran (every chapter)
    plots               the house style and the figure primitives more than one chapter draws
    tables              the one table type: HTML or Markdown in the book, plain text for nbval
    notebook            setup(): seeds, print options, plot style
    validation          the argument checks every helper shares: integers, sizes, ids, families (when things go wrong)

Every module lists its public names in __all__; `from helpers import name` finds each of them here. The package
imports a module on first use (PEP 562), so `import helpers.checkpoint` does not pay for matplotlib or scikit-learn.
"""

from __future__ import annotations

import ast
from importlib import import_module
from pathlib import Path

MODULES = ("anatomy", "checkpoint", "families", "findings", "input_layers", "layernorm", "long_inputs",
           "long_retrieval", "notebook", "plots", "position_figures", "position_rows", "position_schemes",
           "position_stats", "positions", "pretraining", "pretraining_controls", "pretraining_figures",
           "pretraining_stats", "relative_positions", "scratch", "segments", "sinusoids", "tables", "token_figures",
           "tokens", "train_figures", "training", "validation")
_OWNERS: dict[str, str] = {}  # public name -> the module that defines it, read from each module's __all__


def _listed(module: str) -> list[str]:
    """The names a module's `__all__ = [...]` and `__all__ += [...]` lines list, read without importing it."""
    names = []
    for node in ast.parse((Path(__file__).parent / f"{module}.py").read_text()).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else getattr(
            node, "target", None)
        if isinstance(node, (ast.Assign, ast.AugAssign)) and isinstance(target, ast.Name) and target.id == "__all__":
            names += ast.literal_eval(node.value)
    return names


def _owners() -> dict[str, str]:
    if not _OWNERS:
        _OWNERS.update({name: module for module in MODULES for name in _listed(module)})
    return _OWNERS


def __getattr__(name: str):
    """A submodule, or a public name of one, imported on first use."""
    if name in MODULES:
        return import_module(f"helpers.{name}")
    if name == "__all__":
        return sorted(_owners())
    if name in _owners():
        value = getattr(import_module(f"helpers.{_owners()[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'helpers' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *MODULES, *_owners()})
