"""The exported graph against torch on the chapters' own sentences: the inputs, Python onnxruntime's outputs, and
transformers' (model.embeddings and the full BertModel) for each; `python -m tools.widget.compare` prints the largest
difference per output and weight format."""

from __future__ import annotations

import numpy as np
import torch

from tools.widget.model import blinded, reference

# The sentences the four chapters with a live box print (token_embeddings, segment_embeddings, learned_positions,
# sum_and_layernorm), as (sentence A, sentence B or "").
CHAPTER_TEXTS = [
    ("I am Sinan", ""), ("We lived above the clouds", ""), ("this is a test sentence", ""), ("I am a man", ""),
    ("She is Zoe", ""), ("let's tokenize something?", ""), ("Paris is the [MASK] of France ☃", ""),
    ("I am Sinan", "She is Zoe"),
    ("Where do penguins live?", "Most penguins live in the Southern Hemisphere."),
    ("the man went to the store", "he bought a gallon of milk"), ("penguins cannot fly", "they live in the south"),
    ("the cat saw the dog", ""), ("We lived above the clouds now", ""),
    ("I am Sinan", "We lived above the clouds"),
]
MODES = ("normal", "shuffled", "removed")


def shuffled(n: int) -> list[int]:
    """The widget's fixed shuffle of positions 0..n-1 (widget.js: MINSTD from seed 12345, Fisher-Yates)."""
    order, seed = list(range(n)), 12345
    for i in range(n - 1, 0, -1):
        seed = seed * 48271 % 2147483647
        j = seed % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def positions(n: int, mode: str) -> list[int]:
    """The position ids the widget feeds for `mode` (removed: the usual ids, their rows multiplied by 0)."""
    if mode not in MODES:
        raise ValueError(f"position mode {mode!r} is not one of {MODES}")
    return shuffled(n) if mode == "shuffled" else list(range(n))


def encode(tokenizer, a: str, b: str = "") -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, token_type_ids), each (1, seq), as the book's tokenizer makes them."""
    encoded = tokenizer(a, b or None, return_tensors="pt")
    return encoded["input_ids"], encoded["token_type_ids"]


def run_onnx(session, ids: torch.Tensor, types: torch.Tensor, mode: str) -> dict[str, np.ndarray]:
    """The exported graph's outputs (word, segment, position, summed, normed, hidden), each (1, seq, hidden)."""
    position_ids = np.array([positions(ids.shape[1], mode)], dtype=np.int64)
    feeds = {"input_ids": ids.numpy(), "token_type_ids": types.numpy(), "position_ids": position_ids,
             "position_scale": np.array([0.0 if mode == "removed" else 1.0], dtype=np.float32)}
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds), strict=True))


def run_torch(bert, blind, ids: torch.Tensor, types: torch.Tensor, mode: str) -> dict[str, np.ndarray]:
    """The same quantities from transformers: the three tables indexed directly, model.embeddings, BertModel
    (`blind`, the model with its position table zeroed, for mode "removed")."""
    position_ids = torch.tensor([positions(ids.shape[1], mode)])
    tables = bert.embeddings
    with torch.no_grad():
        word = tables.word_embeddings.weight[ids]
        segment = tables.token_type_embeddings.weight[types]
        position = tables.position_embeddings.weight[position_ids] * (0.0 if mode == "removed" else 1.0)
    normed, hidden = reference(blind if mode == "removed" else bert, ids, types, position_ids)
    return {"word": word.numpy(), "segment": segment.numpy(), "position": position.numpy(),
            "summed": (word + segment + position).numpy(), "normed": normed.numpy(), "hidden": hidden.numpy()}


def mean_pooled_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of two texts' last hidden states, each averaged over its tokens (sentence-transformers' pooling)."""
    u, v = a[0].astype(np.float64).mean(axis=0), b[0].astype(np.float64).mean(axis=0)
    return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))


def both(session, bert, blind, tokenizer, a: str, b: str, mode: str) -> tuple[dict, dict]:
    """(onnx, torch) for one chapter text and mode; with a sentence B, each side's "cosine" of A and B run alone."""
    ids, types = encode(tokenizer, a, b)
    ours, theirs = run_onnx(session, ids, types, mode), run_torch(bert, blind, ids, types, mode)
    if b:
        alone = [encode(tokenizer, text) for text in (a, b)]
        ours["cosine"] = mean_pooled_cosine(*(run_onnx(session, i, t, mode)["hidden"] for i, t in alone))
        theirs["cosine"] = mean_pooled_cosine(*(run_torch(bert, blind, i, t, mode)["hidden"] for i, t in alone))
    return ours, theirs


def largest_differences(session, bert, tokenizer) -> dict[str, float]:
    """The largest |onnx - torch| per output (and the two sentences' cosine) over every chapter text and mode."""
    worst: dict[str, float] = {}
    blind = blinded(bert)
    for a, b in CHAPTER_TEXTS:
        for mode in MODES:
            ours, theirs = both(session, bert, blind, tokenizer, a, b, mode)
            for name, value in ours.items():
                worst[name] = max(worst.get(name, 0.0), float(np.abs(np.subtract(value, theirs[name])).max()))
    return worst


def main() -> None:
    """Print each format's size and largest differences from torch."""
    import onnxruntime

    from helpers.checkpoint import load_bert
    from tools.widget.export import onnx_path
    from tools.widget.formats import FORMATS

    bert, tokenizer = load_bert()
    print("format   MiB   " + "  ".join(f"{name:>8}" for name in ("word", "segment", "position", "summed",
                                                                   "normed", "hidden", "cosine")))
    for fmt in FORMATS:
        path = onnx_path(fmt)
        if not path.exists():
            continue
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        worst = largest_differences(session, bert, tokenizer)
        print(f"{fmt:6} {path.stat().st_size / 2**20:5.1f}   " + "  ".join(
            f"{worst[name]:8.1e}" for name in ("word", "segment", "position", "summed", "normed", "hidden",
                                               "cosine")))


if __name__ == "__main__":
    main()
