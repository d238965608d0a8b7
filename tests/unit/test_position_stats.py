"""helpers.position_stats against brute-force loops, scipy's paired t-test and a hand-worked Holm example."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats
from transformers.models.t5.modeling_t5 import T5Attention

from helpers.position_stats import (
    bare_rows,
    holm,
    interval,
    paired_gap,
    prefix_rows,
    rates,
    seed_test,
    trained_pair_share,
    untrained_bucket_share,
    verdict,
)


def test_the_two_way_bootstrap_matches_a_loop():
    matrix = np.random.default_rng(1).random((5, 7))
    mean, low, high = interval(matrix, resamples=300, seed=3)
    rng = np.random.default_rng(3)  # the same draws, in the same order, one resample at a time
    seeds, rows = rng.integers(0, 5, (300, 5)), rng.integers(0, 7, (300, 7))
    means = [np.mean([[matrix[s, r] for r in rows[b]] for s in seeds[b]]) for b in range(300)]
    assert mean == pytest.approx(matrix.mean())
    assert (low, high) == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])))
    gap = paired_gap(matrix, matrix * 0.5, resamples=300, seed=3)
    assert gap == pytest.approx(interval(matrix * 0.5, resamples=300, seed=3))


def test_the_seed_test_is_scipy_s_paired_t_test_on_per_seed_means():
    rng = np.random.default_rng(2)
    a, b = rng.random((5, 9)), rng.random((5, 9))
    gap, low, high, p = seed_test(a, b)
    reference = stats.ttest_rel(a.mean(axis=1), b.mean(axis=1))
    half = stats.t.ppf(0.975, 4) * (a.mean(1) - b.mean(1)).std(ddof=1) / np.sqrt(5)
    assert p == pytest.approx(reference.pvalue) and gap == pytest.approx((a - b).mean())
    assert (low, high) == pytest.approx((gap - half, gap + half))
    assert seed_test(np.ones((5, 3)), np.ones((5, 3))) == (0.0, 0.0, 0.0, 1.0)


def test_holm_on_a_hand_worked_family_and_the_claim_rule():
    # sorted 0.01, 0.03, 0.04 -> 3 * 0.01, max(0.03, 2 * 0.03), max(0.06, 1 * 0.04)
    assert holm({"a": 0.01, "b": 0.04, "c": 0.03}) == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06})
    assert verdict(0.2, (0.1, 0.3), (0.12, 0.28), 0.01) == "higher"
    assert verdict(-0.2, (-0.3, -0.1), (-0.28, -0.12), 0.01) == "lower"
    assert verdict(0.2, (0.1, 0.3), (0.12, 0.28), 0.2) == "undecided"  # Holm's p too large
    assert verdict(0.04, (0.035, 0.045), (0.03, 0.05), 0.001) == "about equal"  # clear, but below 0.05
    assert verdict(0.01, (-0.02, 0.04), (-0.02, 0.04), 0.5) == "about equal"


def test_untrained_bucket_share_matches_a_loop_and_the_issue_s_count():
    L = 16
    for causal in (True, False):
        bucket = {d: int(T5Attention._relative_position_bucket(torch.tensor(d), bidirectional=not causal,
                                                               num_buckets=16, max_distance=64))
                  for d in range(-63, 64)}
        trained = {bucket[d] for d in range(-(L - 1), 1 if causal else L)}
        for n in (16, 32, 64):
            pairs = [(i, j) for i in range(n) for j in range(n) if not (causal and j > i)]
            share = sum(bucket[j - i] not in trained for i, j in pairs) / len(pairs)
            assert untrained_bucket_share(n, L, causal) == pytest.approx(share)
            if n > L:
                past = [(i, j) for i, j in pairs if i >= L]
                share = sum(bucket[j - i] not in trained for i, j in past) / len(past)
                assert untrained_bucket_share(n, L, causal, past_only=True) == pytest.approx(share)
    assert round(untrained_bucket_share(64, L, True), 2) == 0.52  # issue 44: 52% of causal pairs at 4L


def test_trained_pair_share_counts_every_training_pair():
    L, k = 16, 3
    for causal in (True, False):
        counts = np.zeros(L)
        for n in range(k + 2, L + 1):  # the training lengths, equally likely
            for i in range(n):
                for j in range(n):
                    if not (causal and j > i):
                        counts[abs(i - j)] += 1
        assert trained_pair_share(L, k, causal).numpy() == pytest.approx(counts / counts.sum())


def test_rates_divide_by_the_scored_positions_and_bad_names_are_clear_errors():
    results = {"config": {"train_length": 16, "shift": 3}, "variants": {"base": {}, "k-1": {"shift": 1}},
               "cells": {"a|b|c|base": {"plain": [{"32": {"in": [13, 0], "past": [16, 8]}}] * 2},
                         "a|b|c|k-1": {"plain": [{"16": {"in": [15, 3]}}] * 2}}}
    assert rates(results, "a|b|c|base", 32, "in").tolist() == [[1.0, 0.0]] * 2
    assert rates(results, "a|b|c|base", 32, "past").tolist() == [[1.0, 0.5]] * 2
    assert rates(results, "a|b|c|k-1", 16, "in").tolist() == [[1.0, 0.2]] * 2
    results["cells"]["a|b|c|base"]["plain"] = [{"16": {"in": [9, 3], "in_n": [9, 12]}}] * 2  # a prefix
    assert rates(results, "a|b|c|base", 16, "in").tolist() == [[1.0, 0.25]] * 2
    results["cells"]["a|b|c|k-1"]["plain"] = [{"16": {"in": [15, 3, 0]}}] * 2  # 2 seeds, 3 rows
    assert rates(results, "a|b|c|k-1", 16, "in").tolist() == [[1.0, 0.2, 0.0]] * 2
    prefixed = {"config": {"train_length": 16, "shift": 3}, "variants": {"prefix": {}},
                "cells": {"a|b|c|prefix": {"plain": [{"16": {"in": [13, 0, 9], "in_n": [13, 12, 9]}},
                                                     {"16": {"in": [0, 6, 9], "in_n": [13, 12, 9]}}]}}}
    assert bare_rows(prefixed, "a|b|c|prefix").tolist() == [True, False, False]  # row 0 has no prefix
    with pytest.raises(KeyError, match="no cell"):
        rates(results, "rope", 32, "in")
    with pytest.raises(KeyError, match="no control"):
        rates(results, "a|b|c|base", 32, "in", "window")
    with pytest.raises(ValueError, match="part must be"):
        rates(results, "a|b|c|base", 32, "all")
    with pytest.raises(ValueError, match="no positions past L"):
        rates(results, "a|b|c|k-1", 16, "past")
    with pytest.raises(ValueError, match="seeds, rows"):
        interval([1.0, 2.0])
    with pytest.raises(ValueError, match="length must be"):
        untrained_bucket_share(0, 16, True)


def test_prefix_rows_are_scipy_s_paired_t_on_bare_minus_marked_and_on_bare_minus_the_same_base_rows():
    rng = np.random.default_rng(3)
    cells = {}
    for name in ("a", "b"):
        per_seed = [{"16": {"in": rng.integers(0, 10, 4).tolist(), "in_n": [13, 11, 9, 13]}} for _ in range(4)]
        cells[f"{name}|m|t|prefix"] = {"plain": per_seed}
        cells[f"{name}|m|t|base"] = {"plain": [{"16": {"in": rng.integers(0, 14, 4).tolist()}} for _ in range(4)]}
    results = {"config": {"train_length": 16, "shift": 3}, "variants": {"prefix": {}, "base": {}}, "cells": cells}
    got = prefix_rows(results)
    assert len(got) == 4 and all(row["learned"] for row in got.values())
    for x in "ab":
        rows = np.array([[c / n for c, n in zip(s["16"]["in"], s["16"]["in_n"], strict=True)]
                         for s in cells[f"{x}|m|t|prefix"]["plain"]])
        base = np.array([s["16"]["in"] for s in cells[f"{x}|m|t|base"]["plain"]]) / 13
        for kind, diff in (("marked", rows[:, [0, 3]].mean(1) - rows[:, [1, 2]].mean(1)),  # rows 0, 3: no prefix
                           ("base", (rows[:, [0, 3]] - base[:, [0, 3]]).mean(1))):  # the same rows, base model
            row = got[f"{x} prefix bare - {kind} | m | t | before L at 16"]
            expected = stats.ttest_1samp(diff, 0.0)
            assert row["gap"] == pytest.approx(diff.mean()) and row["p"] == pytest.approx(expected.pvalue)
            assert row["seeds"] == pytest.approx(tuple(expected.confidence_interval(0.95)))
            assert row["boot"][0] <= row["gap"] + 1e-9 and row["gap"] - 1e-9 <= row["boot"][1]
    cells["a|m|t|prefix"]["plain"][1]["16"]["in_n"] = [13, 13, 9, 13]  # another seed, other rows: refused
    with pytest.raises(ValueError, match="different test rows"):
        prefix_rows(results)
