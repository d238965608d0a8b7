"""Scoring a way through long inputs: documents with held-out sentences, retrieval, and a paired interval.

Taught in "Build the layer yourself", section "Does the pooled vector still read the later text?". Each
document loses a few sentences before it is encoded; each lost sentence, encoded alone, is a query that must
find its own document among all of them. The query never occurs in the text it is matched against, so a hit
needs the meaning, not a shared run of word pieces. Two ways through are compared on the same queries, with a
bootstrap over documents (a document's queries move together).
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from helpers.plots import HATCHES, OKABE_ITO, _numpy
from helpers.validation import check_allocation, integer, real

__all__ = ["offline_texts", "held_out_documents", "band_of", "band_sums", "pooled", "scores", "paired_interval",
           "verdict", "accuracy_bars"]

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def prose_sentences(text: str) -> list[str]:
    """The sentences of a text's prose paragraphs; indented blocks (code, tables) and markup lines dropped."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}.")
    sentences = []
    for paragraph in re.split(r"\n\s*\n", text):
        if paragraph.startswith((" ", "\t", "..")):  # code, grammar, tables, directives
            continue
        line = " ".join(part.strip() for part in paragraph.splitlines()).strip()
        letters = sum(c.isalpha() or c == " " for c in line) / max(len(line), 1)
        if letters >= 0.85 and re.search(r"[a-z]+ [a-z]+ [a-z]+", line):  # words, not symbols
            sentences += SENTENCE_END.split(line)
    return sentences


def offline_texts() -> dict[str, str]:
    """{name: text}: the Python reference topics that `help()` shows, as CPython 3.11.7 ships them (PSF licence).

    A copy in helpers/data: each Python release rewrites its own pydoc_data, and the chapter's numbers must not
    depend on which Python a reader runs."""
    topics = json.loads(gzip.decompress((Path(__file__).parent / "data" / "python_topics.json.gz").read_bytes()))
    return {name: topics[name] for name in sorted(topics)}


@dataclass
class HeldOut:
    """One document with its held-out sentences: `ids` (length,), each query's ids, and where each gap sits."""

    ids: torch.Tensor
    queries: list[torch.Tensor]
    gaps: list[int]


def hold_out(sentence_ids: list[list[int]], length: int, edges: list[int], shortest: int = 8,
             longest: int = 40) -> HeldOut | None:
    """Take one sentence out of each band [edges[i], edges[i + 1]) of a document of `length` word pieces.

    `sentence_ids` are the document's sentences as word-piece ids, in order. In each band the sentence of
    `shortest`..`longest` pieces that starts nearest the band's middle is removed; the rest is cut to `length`.
    None when the sentences are too few to fill `length` after the removals, or a band has no such sentence.
    """
    length = integer("length", length, minimum=1)
    if list(edges) != sorted(set(edges)) or edges[0] != 0 or edges[-1] != length:
        raise ValueError(f"edges must rise from 0 to length={length}, got {list(edges)}.")
    starts = np.cumsum([0] + [len(s) for s in sentence_ids])[:-1]
    chosen = []
    for low, high in zip(edges[:-1], edges[1:], strict=True):
        fits = [i for i, s in enumerate(sentence_ids)
                if low <= starts[i] < high and shortest <= len(s) <= longest and i not in chosen]
        if not fits:
            return None
        chosen.append(min(fits, key=lambda i: abs(starts[i] - (low + high) / 2)))
    kept = [i for i in range(len(sentence_ids)) if i not in chosen]
    ids = [t for i in kept for t in sentence_ids[i]]
    if len(ids) < length:
        return None
    gaps = [sum(len(sentence_ids[j]) for j in kept if j < i) for i in chosen]  # where each hole sits
    return HeldOut(torch.tensor(ids[:length]), [torch.tensor(sentence_ids[i]) for i in chosen], gaps)


def held_out_documents(texts: dict[str, str], tokenizer, length: int, edges: list[int], count: int
                       ) -> dict[str, HeldOut]:
    """Up to `count` documents of `length` word pieces, each with one held-out sentence per band (see hold_out).

    A text's prose sentences are cut, in order, into the shortest runs that make one document each; a sentence
    that an earlier text already holds is dropped (the Python topics repeat each other), so no query occurs in
    another document either.
    """
    length, count = integer("length", length, minimum=1), integer("count", count, minimum=2)
    seen, documents = set(), {}
    for name, text in texts.items():
        fresh = [s for s in prose_sentences(text) if s not in seen]
        seen.update(fresh)
        run, size, part = [], 0, 1
        for ids in tokenizer(fresh, add_special_tokens=False, verbose=False)["input_ids"] if fresh else []:
            run, size = run + [ids], size + len(ids)
            if size < length + 10 * (len(edges) - 1):  # too short to hold the document and its queries
                continue
            document = hold_out(run, length, edges)
            if document is not None:
                documents[f"{name} {part}"], part = document, part + 1
                if len(documents) == count:
                    return documents
            if document is not None or size > length + 40 * (len(edges) - 1):  # done, or a band has no query
                run, size = [], 0
    return documents


def band_of(positions, edges: list[int]) -> torch.Tensor:
    """(n,) positions -> (n,) band index i with edges[i] <= position < edges[i + 1]."""
    return torch.bucketize(torch.as_tensor(positions), torch.as_tensor(edges[1:]), right=True)


def band_sums(states: torch.Tensor, edges: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(length, hidden) vectors -> (bands, hidden) sums and (bands,) counts of the rows in each band."""
    band = band_of(torch.arange(len(states)), edges)  # (length,)
    sums = torch.zeros(len(edges) - 1, states.shape[1], dtype=states.dtype).index_add_(0, band, states)
    return sums, torch.bincount(band, minlength=len(edges) - 1)


def pooled(sums: torch.Tensor, counts: torch.Tensor, owners, bands) -> tuple[torch.Tensor, torch.Tensor]:
    """(docs, bands, hidden) sums, (docs, bands) counts -> each document's mean vector (docs, hidden), and for
    each query the mean of its own document without the query's band (queries, hidden); nan where nothing is left."""
    owners, bands = torch.as_tensor(owners), torch.as_tensor(bands)
    if sums.dim() != 3 or counts.shape != sums.shape[:2] or owners.shape != bands.shape:
        raise ValueError(f"sums (docs, bands, hidden), counts (docs, bands), owners and bands (queries,) expected, "
                         f"got {tuple(sums.shape)}, {tuple(counts.shape)}, {tuple(owners.shape)}, "
                         f"{tuple(bands.shape)}.")
    full = sums.sum(1) / counts.sum(1, keepdim=True)  # (docs, hidden)
    rest_sum = sums[owners].sum(1) - sums[owners, bands]  # (queries, hidden)
    rest_count = counts[owners].sum(1) - counts[owners, bands]
    rest = rest_sum / rest_count.clamp(min=1).unsqueeze(1)
    return full, rest.masked_fill((rest_count == 0).unsqueeze(1), float("nan"))


def scores(queries: torch.Tensor, full: torch.Tensor, rest: torch.Tensor, owners) -> dict[str, torch.Tensor]:
    """Per query, from cosines: `topic` (1 when its own document's vector is the nearest of all), `rr` (the
    reciprocal rank of its own document), `margin` (cos to its own document minus cos to the same document
    without the query's band), `z` (the margin over `spread`, one number per way: the root mean square over
    queries of the standard deviation of a query's cosines to the other documents), `contrast` (1, 0.5 or 0 as
    the margin is above, at or below 0) and `gap` (how near the nearest other document's cosine comes to its own
    document's: the tie a rank could flip on)."""
    owners = torch.as_tensor(owners)
    if queries.dim() != 2 or full.dim() != 2 or rest.shape != queries.shape or owners.shape != (len(queries),):
        raise ValueError(f"queries and rest (q, hidden), full (docs, hidden), owners (q,) expected, got "
                         f"{tuple(queries.shape)}, {tuple(rest.shape)}, {tuple(full.shape)}, {tuple(owners.shape)}.")
    if len(full) < 3:
        raise ValueError(f"scores need at least 3 documents (a spread over the others), got {len(full)}.")
    unit = F.normalize(queries, dim=-1)  # (q, hidden)
    similarity = unit @ F.normalize(full, dim=-1).T  # (q, docs) cosines
    mine = torch.arange(len(queries)), owners
    own = (unit * F.normalize(full[owners], dim=-1)).sum(-1)  # computed as `without`: equal rows, equal cosines
    margin = own - (unit * F.normalize(rest, dim=-1)).sum(-1)
    others = similarity.clone()
    others[mine] = float("nan")
    spread = torch.from_numpy(np.nanstd(others.numpy(), axis=1, ddof=1)).pow(2).mean().sqrt()  # one per way
    distance = (others - similarity[mine].unsqueeze(1)).abs().nan_to_num(float("inf"))
    rank = 1 + (others > similarity[mine].unsqueeze(1)).sum(1)
    return {"topic": (rank == 1).double(), "rr": 1 / rank.double(), "margin": margin,
            "z": margin / spread.to(margin.dtype), "spread": spread.expand(len(queries)),
            "contrast": 0.5 + 0.5 * torch.sign(margin).double(),
            "gap": distance.min(1).values}


def paired_interval(first, second, groups, level: float = 0.95, resamples: int = 50_000, seed: int = 0
                    ) -> tuple[float, float, float]:
    """Mean of first - second over paired items, and its percentile interval at `level`, resampling whole groups.

    Items of one group (a document's queries) are resampled together, since they are not independent.
    """
    first, second = _numpy(first).astype(float), _numpy(second).astype(float)
    groups = _numpy(groups)
    if first.shape != second.shape or first.shape != groups.shape or first.ndim != 1 or not len(first):
        raise ValueError(f"first, second and groups must be paired 1-d arrays of one length, got {first.shape}, "
                         f"{second.shape} and {groups.shape}.")
    resamples = integer("resamples", resamples, minimum=100)
    level = real("level", level, above=0)
    if level >= 1:
        raise ValueError(f"level is a probability below 1, e.g. 0.95, got {level}.")
    names = np.unique(groups)
    sums = np.array([(first - second)[groups == g].sum() for g in names])  # per group
    counts = np.array([(groups == g).sum() for g in names], dtype=float)
    if len(names) < 2:
        raise ValueError(f"a bootstrap over groups needs at least 2 groups, got {len(names)}.")
    if np.all(sums == sums[0] * counts / counts[0]):  # every group the same: no spread to resample
        mean = float(sums.sum() / counts.sum())
        return mean, mean, mean
    check_allocation("the bootstrap draws", (resamples, len(names)))
    draws = np.random.default_rng(seed).integers(0, len(names), (resamples, len(names)))  # groups, with replacement
    means = sums[draws].sum(1) / counts[draws].sum(1)  # (resamples,)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(sums.sum() / counts.sum()), float(low), float(high)


def verdict(test: tuple[float, float], equivalence: tuple[float, float] | None, margin: float) -> str:
    """The claim rule: 'better' / 'worse' when the `test` interval excludes 0; 'about equal' when the
    `equivalence` interval lies inside ±margin (None: a score with no equivalence margin); else 'undecided'."""
    margin = real("margin", margin, above=0)
    if test[0] > 0:
        return "better"
    if test[1] < 0:
        return "worse"
    if equivalence is not None and -margin < equivalence[0] and equivalence[1] < margin:
        return "about equal"
    return "undecided"


def accuracy_bars(accuracy: dict[str, float], intervals: dict[str, tuple[float, float]], chance: float,
                  title: str = "", xlabel: str = "accuracy", chance_label: str = "chance",
                  xlim: tuple[float, float] = (0, 1.0)):
    """One horizontal bar per method with its interval; chance a dashed line named in the legend, outside the bars."""
    fig, ax = plt.subplots(figsize=(8.0, 0.32 * len(accuracy) + 1.2))
    colours = [c for c in OKABE_ITO if c != "#000000"]  # a black bar would hide its black error bar
    for i, (name, value) in enumerate(accuracy.items()):
        low, high = intervals[name]
        ax.barh(i, value, color=colours[i % len(colours)], hatch=HATCHES[i % len(HATCHES)], edgecolor="white")
        ax.errorbar(value, i, xerr=[[value - low], [high - value]], color="black", capsize=3)
    ax.axvline(chance, color="black", linestyle="--", linewidth=1, label=f"{chance_label} ({chance:.2f})")
    ax.set_yticks(range(len(accuracy)), list(accuracy), fontsize=8)
    ax.invert_yaxis()  # the first method on top
    ax.set(title=title, xlabel=xlabel, xlim=xlim)
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig
