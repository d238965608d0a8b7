"""From text to token ids and context-free token vectors: token tables, WordPiece, nearest tokens, PCA."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.decomposition import PCA
from sklearn.metrics.pairwise import cosine_similarity
from torch import nn

from helpers import validation
from helpers.tables import ResultTable

__all__ = ["token_table", "greedy_wordpiece", "nearest_tokens", "nearest_table", "single_token_id", "token_matrix",
           "row_norms", "fresh_row_norms", "word_group_pca"]


# Tokenizers say "no limit" with this huge model_max_length (transformers' VERY_LARGE_INTEGER is 1e30).
_NO_LIMIT = 10**9


@dataclass(frozen=True)
class TokenRow:
    """One token of an encoded text: where it stands, what it is, which row of each table it selects.

    special is True for the tokenizer's special tokens ([CLS], [SEP], [PAD], [UNK], [MASK]), whether the
    tokenizer added them or the text contained them.
    """

    position: int
    token: str
    id: int
    token_type: int
    special: bool


class TokenTable(ResultTable):
    """The rows of token_table(); iterate over it for TokenRow objects, print it for a readable table."""

    def __init__(self, token_rows: Sequence[TokenRow], truncated: bool = False):
        self.token_rows = list(token_rows)
        self.truncated = truncated
        super().__init__(["position", "token", "id", "token type", "special"],
                         [[r.position, r.token, r.id, r.token_type, "yes" if r.special else ""]
                          for r in self.token_rows], code_columns=["token"], html=False)

    def __iter__(self):
        return iter(self.token_rows)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return TokenTable(self.token_rows[index], truncated=self.truncated)
        return self.token_rows[index]

    @property
    def tokens(self) -> list[str]:
        return [r.token for r in self.token_rows]

    @property
    def ids(self) -> list[int]:
        return [r.id for r in self.token_rows]


def _check_text(name: str, text) -> None:
    if not isinstance(text, str):
        raise TypeError(
            f"{name} must be one string (str), got {type(text).__name__}. "
            "Pass one text at a time; for a batch, call token_table once per text."
        )


def _position_limit(tokenizer, max_positions: int | None) -> int | None:
    if max_positions is None:
        limit = getattr(tokenizer, "model_max_length", None)
        return limit if isinstance(limit, int) and limit < _NO_LIMIT else None
    return validation.integer("max_positions", max_positions, minimum=2, hint=" (room for [CLS] and [SEP])")


def token_table(tokenizer, text: str, text_pair: str | None = None, *, max_positions: int | None = None,
                truncate: bool = False) -> TokenTable:
    """Tokenise one text (or a pair) and return one row per token: position, token, id, token type, special.

    The empty string gives the two rows [CLS] [SEP]. A text whose tokens do not fit in max_positions (default: the
    tokenizer's model_max_length, which for BERT is the size of the position table) raises ValueError, unless
    truncate=True, which keeps the first max_positions tokens the way tokenizer(..., truncation=True) does.

    Taught in token embeddings, "Text to ids".
    """
    validation.check_tokenizer(tokenizer, "token_table")
    _check_text("text", text)
    if text_pair is not None:
        _check_text("text_pair", text_pair)
    limit = _position_limit(tokenizer, max_positions)
    if truncate and limit is None:
        raise ValueError("truncate=True needs a limit: pass max_positions (e.g. model.config.max_position_embeddings).")
    if truncate:
        encoding = tokenizer(text, text_pair, truncation=True, max_length=limit)
    else:
        encoding = tokenizer(text, text_pair, truncation=False, verbose=False)
    ids = list(encoding["input_ids"])
    if limit is not None and len(ids) > limit:
        raise ValueError(
            f"The text tokenises to {len(ids)} tokens but the position table has {limit} rows "
            f"(positions 0..{limit - 1}). Pass truncate=True to keep the first {limit} tokens, "
            "or split the text into windows."
        )
    types = encoding.get("token_type_ids") or [0] * len(ids)
    tokens = tokenizer.convert_ids_to_tokens(ids)
    special_ids = set(tokenizer.all_special_ids)
    rows = [TokenRow(position=p, token=t, id=i, token_type=s, special=i in special_ids)
            for p, (t, i, s) in enumerate(zip(tokens, ids, types, strict=True))]
    return TokenTable(rows, truncated=truncate and limit is not None and len(ids) == limit)


@dataclass(frozen=True)
class WordPieceResult:
    """Greedy longest-match-first WordPiece of one word: the pieces and every vocabulary lookup tried."""

    pieces: list[str]
    tried: list[tuple[str, bool]]  # (candidate, in vocabulary?) in the order they were looked up


def greedy_wordpiece(word: str, vocab: Mapping[str, int], prefix: str = "##",
                     unk_token: str = "[UNK]",
                     max_chars: int = 100) -> WordPieceResult:
    """Split one normalised word as BERT's WordPiece does: longest match first.

    Pieces after the first carry '##'. If some remainder matches nothing, the
    whole word becomes [UNK] (Devlin et al. 2019; Wu et al. 2016).

    Taught in token embeddings, "Why `Sinan` becomes `sin` + `##an`".
    """
    _check_text("word", word)
    if not isinstance(vocab, Mapping):
        raise TypeError(f"vocab must map tokens to ids, got "
                        f"{type(vocab).__name__}: pass tokenizer.get_vocab().")
    for name, value in (("prefix", prefix), ("unk_token", unk_token)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str (BERT uses '##' and "
                            f"'[UNK]'), got {type(value).__name__}.")
    max_chars = validation.integer("max_chars", max_chars, minimum=1,
                                   hint=" (BERT's limit is 100)")
    if not word or any(ch.isspace() for ch in word):
        raise ValueError(f"greedy_wordpiece splits one word without spaces, "
                         f"got {word!r}; use tokenizer.tokenize for running "
                         "text.")
    if len(word) > max_chars:
        return WordPieceResult([unk_token], [])
    pieces, tried, start = [], [], 0
    while start < len(word):
        end, match = len(word), None
        while end > start:  # the longest candidate first, then one shorter
            candidate = (prefix if start > 0 else "") + word[start:end]
            found = candidate in vocab
            tried.append((candidate, found))
            if found:
                match = candidate
                break
            end -= 1
        if match is None:
            return WordPieceResult([unk_token], tried)
        pieces.append(match)
        start = end
    return WordPieceResult(pieces, tried)


def _word_table(model_or_table, helper: str) -> torch.Tensor:
    if isinstance(model_or_table, nn.Embedding):
        return model_or_table.weight
    if hasattr(model_or_table, "word_embeddings"):
        validation.whole_model(model_or_table, helper)  # refuses model.embeddings, saying what to pass
    if isinstance(model_or_table, nn.Module) and hasattr(model_or_table, "get_input_embeddings"):
        return model_or_table.get_input_embeddings().weight
    raise TypeError(f"{helper} expected a BERT model (model, tokenizer = load_bert()) or an nn.Embedding, "
                    f"got {type(model_or_table).__name__}.")


def single_token_id(tokenizer, word: str) -> int:
    """The id of a vocabulary entry ('##ing', '[SEP]') or of a word that WordPiece keeps as one known token.

    Taught in token embeddings, "Context-free vectors"."""
    validation.check_tokenizer(tokenizer, "single_token_id")
    _check_text("word", word)
    if not word.strip():
        raise ValueError("word is empty: give a word such as 'bank'.")
    entry = tokenizer.convert_tokens_to_ids(word)  # an exact vocabulary entry, taken as it is
    if isinstance(entry, int) and (entry != tokenizer.unk_token_id or word == tokenizer.unk_token):
        return entry
    pieces = tokenizer.tokenize(word)
    if len(pieces) != 1:
        raise ValueError(
            f"{word!r} is not one token: WordPiece splits it into {pieces}. Ask for one of those pieces instead."
        )
    if pieces[0] == tokenizer.unk_token and word != tokenizer.unk_token:
        raise ValueError(f"{word!r} is not in the vocabulary (it becomes {tokenizer.unk_token}).")
    return int(tokenizer.convert_tokens_to_ids(pieces[0]))


def token_matrix(model, tokenizer, words: Sequence[str]) -> torch.Tensor:
    """The token-embedding rows of single-token words, stacked: (len(words), hidden).

    Taught in token embeddings, "Geometry of the table"."""
    table = _word_table(model, "token_matrix")
    ids = [single_token_id(tokenizer, w) for w in validation.strings("words", words)]
    _check_ids_fit(ids, table, tokenizer)
    return table.detach()[ids]


def _check_ids_fit(ids, table: torch.Tensor, tokenizer) -> None:
    if max(ids) >= table.shape[0]:
        raise ValueError(
            f"The tokenizer gives id {max(ids)} but the token table has only {table.shape[0]} rows: "
            "the tokenizer does not belong to this model."
        )
    if len(tokenizer) > table.shape[0]:
        raise ValueError(f"The tokenizer knows {len(tokenizer)} tokens but the token table has {table.shape[0]} "
                         "rows: the tokenizer does not belong to this model.")


@dataclass(frozen=True)
class Neighbour:
    """A token near the query token in the embedding table."""

    token: str
    id: int
    cosine: float


def nearest_tokens(model, tokenizer, word: str, k: int = 5) -> list[Neighbour]:
    """The k tokens whose embedding rows have the highest cosine similarity with word's row (itself excluded).

    Ties are broken by the smaller id. Cosine similarity comes from scikit-learn.

    Taught in token embeddings, "Geometry of the table".
    """
    k = validation.integer("k", k, hint=" (how many neighbours)")
    table = _word_table(model, "nearest_tokens").detach()  # (vocab, hidden)
    query = single_token_id(tokenizer, word)
    _check_ids_fit([query], table, tokenizer)
    rows = min(table.shape[0], len(tokenizer))  # rows the tokenizer can name
    if not 1 <= k < rows:
        raise ValueError(f"k must be between 1 and {rows - 1} (the other tokens of the vocabulary), got {k}.")
    table = table[:rows].float().numpy()
    similarity = cosine_similarity(table[query:query + 1], table)[0]  # (vocab,)
    similarity[query] = -np.inf  # the word itself is not its own neighbour
    order = np.lexsort((np.arange(rows), -similarity))[:k]  # highest cosine first, then smaller id
    tokens = tokenizer.convert_ids_to_tokens([int(i) for i in order])
    return [Neighbour(t, int(i), float(similarity[i])) for t, i in zip(tokens, order, strict=True)]


def nearest_table(model, tokenizer, words: Sequence[str], k: int = 5, digits: int = 2) -> ResultTable:
    """One row per word: its k nearest tokens with their cosine similarity, rounded for display.

    Taught in token embeddings, "Geometry of the table"."""
    words = validation.strings("words", words)
    k, digits = validation.integer("k", k, minimum=1), validation.integer("digits", digits, minimum=0)
    rows = []
    for word in words:
        near = nearest_tokens(model, tokenizer, word, k)
        rows.append([word] + [f"{n.token} ({n.cosine:.{digits}f})" for n in near])
    return ResultTable(["word"] + [f"#{i + 1}" for i in range(k)], rows, html=False)


def row_norms(model) -> torch.Tensor:
    """The Euclidean norm of every row of the token-embedding table: (vocab,).

    Taught in token embeddings, "Row norms, and the row of `[PAD]`"."""
    return torch.linalg.vector_norm(_word_table(model, "row_norms").detach(), dim=1)


def fresh_row_norms(count: int, hidden: int, std: float, seed: int = 0) -> torch.Tensor:
    """The norms of `count` rows drawn as BertModel initialises a table, N(0, std²) per entry: (count,).

    Taught in token embeddings, "Row norms, and the row of `[PAD]`"."""
    count, hidden = validation.integer("count", count, minimum=1), validation.integer("hidden", hidden, minimum=1)
    std = validation.real("std", std, above=0)
    validation.check_allocation("the fresh rows", (count, hidden), 4)
    rows = torch.randn(count, hidden, generator=torch.Generator().manual_seed(seed)) * std
    return torch.linalg.vector_norm(rows, dim=1)


@dataclass(frozen=True)
class GroupProjection:
    """Word vectors projected on their first principal components, with the group of each word."""

    coords: np.ndarray  # (words, components)
    words: list[str]
    groups: list[str]
    explained_variance_ratio: np.ndarray  # (components,)


def word_group_pca(model, tokenizer, groups: Mapping[str, Sequence[str]], n_components: int = 2) -> GroupProjection:
    """Fit a PCA (scikit-learn) on the token rows of all words in the groups and project them.

    Taught in token embeddings, "Geometry of the table"."""
    if not isinstance(groups, Mapping):
        raise TypeError(f"groups must be a dict of group name -> list of words, e.g. {{'colours': ['red', 'blue']}}; "
                        f"got {type(groups).__name__}.")
    if not groups or not all(groups.values()):
        raise ValueError("groups must map each group name to a non-empty list of words.")
    groups = {name: validation.strings(f"groups[{name!r}]", words) for name, words in groups.items()}
    n_components = validation.integer("n_components", n_components, minimum=1)
    words = [w for ws in groups.values() for w in ws]
    labels = [g for g, ws in groups.items() for _ in ws]
    if len(words) <= n_components:
        raise ValueError(f"PCA with {n_components} components needs more than {n_components} words, got {len(words)}.")
    vectors = token_matrix(model, tokenizer, words).float().numpy()  # (words, hidden)
    pca = PCA(n_components=n_components, svd_solver="full")
    coords = pca.fit_transform(vectors)  # (words, n_components)
    return GroupProjection(coords, words, labels, pca.explained_variance_ratio_)


# ------------------------------------------------------------- one change at a time

__all__ += ["final_state", "sense_and_shift_cosines"]


def final_state(model, tokenizer, text: str, word: str, shift: int = 0, keep_cls: bool = False) -> torch.Tensor:
    """The last hidden state of `word` (one token, first occurrence) in `text`, positions moved by `shift`: (hidden,).

    shift=0 gives the model's own default positions; shift=k feeds position ids k, k+1, ... (same tokens, same
    context, only the positions differ); keep_cls=True keeps [CLS] at 0 and moves only the tokens after it.
    Taught in token embeddings, "Context-free vectors"."""
    validation.whole_model(model, "final_state")
    validation.check_tokenizer(tokenizer, "final_state")
    _check_text("text", text)
    shift = validation.integer("shift", shift, minimum=0, hint=" (positions to move the text by)")
    encoded = tokenizer(text, return_tensors="pt")
    ids = encoded["input_ids"]  # (1, seq)
    word_id = single_token_id(tokenizer, word)
    if word_id not in ids[0].tolist():
        raise ValueError(f"{word!r} does not occur as a token of {text!r}.")
    limit = model.config.max_position_embeddings
    if not 0 <= shift <= limit - ids.shape[1]:
        raise ValueError(f"shift must be in 0..{limit - ids.shape[1]} so that every position has a row, got {shift}.")
    if not isinstance(keep_cls, bool):
        raise TypeError(f"keep_cls must be True or False, got {type(keep_cls).__name__} {keep_cls!r}.")
    positions = torch.arange(ids.shape[1]).unsqueeze(0) + shift  # (1, seq)
    if keep_cls:
        positions[0, 0] = 0  # [CLS] stays where it was
    with torch.no_grad():
        hidden = model(**encoded, position_ids=positions).last_hidden_state[0]  # (seq, hidden)
    return hidden[ids[0].tolist().index(word_id)]


def sense_and_shift_cosines(model, tokenizer, word: str, sense_a, sense_b, shift: int = 2) -> dict:
    """Cosines of `word`'s final states, one per pair, for four comparisons that each change one thing.

    "same sense": two sentences of one sense; "other sense": one sentence of each; "moved": a sentence and itself
    with its words moved `shift` positions on ([CLS] kept at 0); "baseline": two different tokens of one sentence.
    Taught in token embeddings, "Context-free vectors"."""
    sense_a = validation.strings("sense_a", sense_a, "sentences")
    sense_b = validation.strings("sense_b", sense_b, "sentences")
    if len(sense_a) < 2 or len(sense_b) < 2:
        raise ValueError(f"need at least two sentences of each sense, got {len(sense_a)} and {len(sense_b)}.")

    def states(texts, moved=0):  # (texts, hidden), unit length
        return F.normalize(torch.stack([final_state(model, tokenizer, t, word, shift=moved, keep_cls=True)
                                        for t in texts]), dim=-1)

    a, b = states(sense_a), states(sense_b)
    within = [(s @ s.T)[torch.triu(torch.ones(len(s), len(s), dtype=torch.bool), diagonal=1)] for s in (a, b)]
    both = torch.cat([a, b])  # (texts, hidden)
    encoded = tokenizer(sense_a + sense_b, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = F.normalize(model(**encoded).last_hidden_state, dim=-1)  # (texts, seq, hidden)
    baseline = []
    for h, mask in zip(hidden, encoded["attention_mask"].bool(), strict=True):
        n = int(mask.sum())
        baseline.append((h[mask] @ h[mask].T)[torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)])
    return {"same sense": torch.cat(within), "other sense": (a @ b.T).flatten(),
            "moved": (both * states(sense_a + sense_b, shift)).sum(dim=-1), "baseline": torch.cat(baseline)}


__all__ += ["sense_hits"]


def sense_hits(model, tokenizer, word: str, sense_a, sense_b, shuffles: int = 1000, seed: int = 0
               ) -> tuple[int, int, float]:
    """How many sentences a nearest-centroid read-out, fitted without each, assigns to their own sense, and how
    often shuffled sense labels do as well: (hits, sentences, p).

    `word`'s final states, unit length; scikit-learn's NearestCentroid, leave-one-out, and permutation_test_score
    with `shuffles` label shuffles (p counts the real labels once, so it is never 0). Chance is half.
    Taught in token embeddings, "Context-free vectors"."""
    from sklearn.model_selection import LeaveOneOut, permutation_test_score
    from sklearn.neighbors import NearestCentroid

    sense_a = validation.strings("sense_a", sense_a, "sentences")
    sense_b = validation.strings("sense_b", sense_b, "sentences")
    if len(sense_a) < 2 or len(sense_b) < 2:
        raise ValueError(f"need at least two sentences of each sense, got {len(sense_a)} and {len(sense_b)}.")
    shuffles = validation.integer("shuffles", shuffles, minimum=1)
    states = F.normalize(torch.stack([final_state(model, tokenizer, t, word) for t in sense_a + sense_b]), dim=-1)
    labels = [0] * len(sense_a) + [1] * len(sense_b)
    score, _, p = permutation_test_score(NearestCentroid(), states.numpy(), labels, cv=LeaveOneOut(),
                                         n_permutations=shuffles, random_state=seed)
    return round(score * len(labels)), len(labels), float(p)
