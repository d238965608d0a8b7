"""helpers.long_retrieval against independent references: numpy loops, scikit-learn's cosine, a hand bootstrap."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
import torch
from sklearn.metrics.pairwise import cosine_similarity

from helpers.long_inputs import copied_rows
from helpers.long_retrieval import (
    band_of,
    band_sums,
    hold_out,
    paired_interval,
    pooled,
    prose_sentences,
    scores,
    verdict,
)


def test_prose_sentences_keep_prose_and_drop_code_and_tables():
    text = ("Assignment binds names. It may raise an error.\n\n   x = 1\n   y = 2\n\n"
            "+-----+-----+\n| a | b |\n\nThe target list is assigned from left to right.")
    assert prose_sentences(text) == ["Assignment binds names.", "It may raise an error.",
                                     "The target list is assigned from left to right."]
    with pytest.raises(TypeError, match="text must be a str"):
        prose_sentences(b"bytes")


def test_hold_out_removes_one_sentence_per_band_and_records_the_gaps():
    sentences = [list(range(100 * i, 100 * i + 10)) for i in range(12)]  # 12 sentences of 10 pieces
    document = hold_out(sentences, 60, [0, 30, 60], shortest=8, longest=12)
    # band middles 15 and 45: sentences starting at 10 or 20 (tie: the first), then at 40 or 50
    removed = [1, 4]
    assert [q.tolist() for q in document.queries] == [sentences[i] for i in removed]
    kept = [t for i, s in enumerate(sentences) if i not in removed for t in s]
    assert document.ids.tolist() == kept[:60]
    assert document.gaps == [10, 30]  # where sentence 1 and sentence 4 were, after the removals
    assert hold_out(sentences[:6], 60, [0, 30, 60], shortest=8, longest=12) is None  # too short to fill 60
    assert hold_out(sentences, 60, [0, 30, 60], shortest=11) is None  # no sentence long enough
    with pytest.raises(ValueError, match="edges must rise from 0 to length=60"):
        hold_out(sentences, 60, [0, 40, 30, 60])


def test_band_sums_match_a_loop_over_rows():
    states = torch.randn(23, 5, dtype=torch.float64)
    edges = [0, 4, 10, 23]
    sums, counts = band_sums(states, edges)
    for b, (low, high) in enumerate(pairwise(edges)):
        torch.testing.assert_close(sums[b], states[low:high].sum(0), rtol=0, atol=1e-12)
        assert counts[b] == high - low
    assert band_of([0, 3, 4, 9, 10, 22], edges).tolist() == [0, 0, 1, 1, 2, 2]


def test_pooled_vectors_are_means_of_the_right_rows():
    torch.manual_seed(0)
    docs = [torch.randn(12, 3, dtype=torch.float64) for _ in range(3)]
    edges = [0, 5, 12]
    parts = [band_sums(d, edges) for d in docs]
    sums, counts = torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])
    full, rest = pooled(sums, counts, owners=[2, 0], bands=[1, 0])
    for i, d in enumerate(docs):
        torch.testing.assert_close(full[i], d.mean(0), rtol=0, atol=1e-12)
    torch.testing.assert_close(rest[0], docs[2][:5].mean(0), rtol=0, atol=1e-12)  # doc 2 without band 1
    torch.testing.assert_close(rest[1], docs[0][5:].mean(0), rtol=0, atol=1e-12)  # doc 0 without band 0
    counts[1, 1] = 0  # document 1 holds band 0 only: nothing is left without it
    sums[1, 1] = 0
    assert pooled(sums, counts, owners=[1, 1], bands=[0, 1])[1][0].isnan().all()


def test_scores_agree_with_scikit_learn_cosine():
    torch.manual_seed(1)
    queries, full, rest = (torch.randn(6, 4, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64),
                           torch.randn(6, 4, dtype=torch.float64))
    owners = torch.tensor([0, 1, 2, 0, 1, 2])
    got = scores(queries, full, rest, owners)
    similarity = cosine_similarity(queries.numpy(), full.numpy())
    np.testing.assert_array_equal(got["topic"].numpy(), (similarity.argmax(1) == owners.numpy()).astype(float))
    own = similarity[np.arange(6), owners.numpy()]
    other = np.diag(cosine_similarity(queries.numpy(), rest.numpy()))
    np.testing.assert_allclose(got["margin"].numpy(), own - other, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(got["contrast"].numpy(), (own > other).astype(float))
    spreads = []
    for i, o in enumerate(owners.tolist()):  # rank, spread and gap by hand, from scikit-learn's cosines
        others = np.delete(similarity[i], o)
        assert got["rr"][i] == 1 / (1 + (others > own[i]).sum())
        spreads.append(np.std(others, ddof=1))
        np.testing.assert_allclose(got["gap"][i], np.abs(others - own[i]).min(), rtol=1e-10)
    spread = np.sqrt(np.mean(np.square(spreads)))  # one per way: the root mean square of the queries' spreads
    np.testing.assert_allclose(got["z"].numpy(), (own - other) / spread, rtol=1e-10)
    np.testing.assert_allclose(got["spread"].numpy(), np.full(6, spread), rtol=1e-10)
    same = scores(queries, full, full[owners], owners)  # nothing removed: exactly 0, a tie scored 0.5
    assert torch.equal(same["margin"], torch.zeros(6, dtype=torch.float64))
    assert torch.equal(same["contrast"], torch.full((6,), 0.5, dtype=torch.float64))
    with pytest.raises(ValueError, match="owners"):
        scores(queries, full, rest, owners[:3])
    with pytest.raises(ValueError, match="at least 3 documents"):
        scores(queries[:2], full[:2], rest[:2], owners[:2] % 2)


def hand_cluster_bootstrap(diff, groups, level, resamples, seed):
    """A plain numpy cluster bootstrap: draw groups with replacement, the mean over their items."""
    rng = np.random.default_rng(seed)
    names = np.unique(groups)
    members = [diff[groups == g] for g in names]
    draws = [np.concatenate([members[i] for i in rng.integers(0, len(names), len(names))]).mean()
             for _ in range(resamples)]
    return np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])


def test_paired_interval_matches_a_hand_cluster_bootstrap():
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(30), 4)
    shift = np.repeat(rng.normal(0.1, 0.2, 30), 4)  # a per-document effect: items of a group move together
    first = shift + rng.normal(0, 0.05, 120)
    second = np.zeros(120)
    mean, low, high = paired_interval(first, second, groups, resamples=4000)
    assert mean == pytest.approx(first.mean(), abs=1e-12)
    hand_low, hand_high = hand_cluster_bootstrap(first - second, groups, 0.95, 4000, 9)
    assert low == pytest.approx(hand_low, abs=0.02) and high == pytest.approx(hand_high, abs=0.02)
    item_low, item_high = np.quantile(  # resampling items instead ignores the groups: too narrow
        [rng.choice(first, 120).mean() for _ in range(2000)], [0.025, 0.975])
    assert high - low > 1.5 * (item_high - item_low)


def test_paired_interval_without_spread_and_bad_input():
    assert paired_interval([1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 1, 1]) == (0.5, 0.0, 1.0)  # 2 groups: draws 0, .5, 1
    assert paired_interval([1, 1, 1, 1], [0, 0, 0, 0], [0, 0, 1, 1]) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="paired 1-d arrays"):
        paired_interval([1, 0], [1], [0, 1])
    with pytest.raises(ValueError, match="at least 2 groups"):
        paired_interval([1, 0], [0, 0], [5, 5])
    with pytest.raises(ValueError, match="level is a probability below 1"):
        paired_interval([1, 0], [0, 0], [0, 1], level=1.5)


def test_the_claim_rule():
    assert verdict((0.01, 0.3), (0.05, 0.2), 0.1) == "better"
    assert verdict((-0.3, -0.01), (-0.2, -0.05), 0.1) == "worse"
    assert verdict((-0.12, 0.12), (-0.08, 0.09), 0.1) == "about equal"
    assert verdict((-0.2, 0.2), (-0.15, 0.09), 0.1) == "undecided"
    assert verdict((-0.12, 0.12), None, 0.1) == "undecided"  # a score with no equivalence margin


def test_copies_that_skip_row_zero_match_numpy():
    table = torch.randn(5, 2, dtype=torch.float64)
    expected = np.concatenate([table.numpy(), np.tile(table.numpy()[1:], (3, 1))])[:14]
    np.testing.assert_array_equal(copied_rows(table, 14, first=1).numpy(), expected)
    with pytest.raises(ValueError, match="first must be a row of the 5-row table"):
        copied_rows(table, 14, first=5)


def test_accuracy_bars_draw_one_bar_per_method_and_chance_in_the_legend():
    from helpers.long_retrieval import accuracy_bars

    fig = accuracy_bars({"one": 0.8, "two": 0.4}, {"one": (0.7, 0.9), "two": (0.3, 0.5)}, chance=0.5)
    ax = fig.axes[0]
    assert [round(p.get_width(), 6) for p in ax.patches] == [0.8, 0.4]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["one", "two"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["chance (0.50)"]
    assert len(ax.texts) == 0  # no label drawn on the data
    many = accuracy_bars({str(i): 0.5 for i in range(9)}, {str(i): (0.4, 0.6) for i in range(9)}, chance=0.5)
    assert all(p.get_facecolor()[:3] != (0.0, 0.0, 0.0) for p in many.axes[0].patches)  # error bars stay visible
