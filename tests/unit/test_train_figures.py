"""helpers.train_figures and the contrast list: what the figure draws is the per-seed mean, every contrast names a
cell the sweep trains."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

from helpers.position_schemes import MASKS, SCHEMES  # noqa: E402
from helpers.position_stats import cell_key, contrast_list, family_of, judge_contrasts, third_session  # noqa: E402
from helpers.train_figures import accuracy_by_position, accuracy_summary, position_accuracy, row_norms_figure  # noqa: E402
from helpers.training import TASKS, VARIANTS, TrainConfig, controls_for, sweep_cells  # noqa: E402

CONFIG = {"train_length": 16, "shift": 3, "test_rows": 4}


def fake_results(seeds=3):
    """Every cell the sweep trains, with random counts: only shapes and bookkeeping matter here."""
    rng = np.random.default_rng(0)
    cells = {}
    for scheme, mask, task, variant in sweep_cells():
        config = TrainConfig(**VARIANTS[variant])
        scores = lambda: {"16": {"in": rng.integers(0, 14, 4).tolist()},  # noqa: E731
                          "32": {"in": rng.integers(0, 14, 4).tolist(), "past": rng.integers(0, 17, 4).tolist()},
                          "64": {"in": rng.integers(0, 14, 4).tolist(), "past": rng.integers(0, 49, 4).tolist()},
                          "by_position": rng.integers(0, 5, 64).tolist()}
        cells[cell_key(scheme, mask, task, variant)] = {
            control: [scores() for _ in range(seeds)] for control in controls_for(scheme, task, config, True)}
        if variant == "prefix":  # rows 0 and 3 bare, 1 and 2 after a prefix: at most 12 or 9 answered positions
            for one in cells[cell_key(scheme, mask, task, variant)]["plain"]:
                one["16"] = {"in": rng.integers(0, 10, 4).tolist(), "in_n": [13, 12, 9, 13]}
    return {"config": CONFIG, "variants": VARIANTS, "cells": cells}


def test_position_accuracy_is_the_mean_over_seeds_and_rows_and_the_figure_has_a_panel_per_mask_and_task():
    results = fake_results()
    key = cell_key("rope", "causal", "copy-back")
    counts = np.array([s["by_position"] for s in results["cells"][key]["plain"]])
    expected = counts.mean(axis=0) / 4
    got = position_accuracy(results, key)
    assert np.isnan(got[:3]).all() and np.allclose(got[3:], expected[3:])
    fig = accuracy_by_position(results)
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == len(MASKS) * len(TASKS)
    assert all(ax.images[0].get_array().shape == (len(SCHEMES), 64) for ax in panels)
    fig = row_norms_figure(np.ones(64), np.ones(64), 16)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["after training", "at initialisation",
                                                               "training length L"]


def test_every_contrast_names_trained_cells_and_falls_in_one_of_five_lists():
    results = fake_results()
    family = contrast_list(results)
    names = [entry[0] for entry in family]
    assert len(names) == len(set(names))
    for _, (first, c1), (second, c2), _, _ in family:
        assert c1 in results["cells"][first] and c2 in results["cells"][second]
    assert {family_of(name) for name in names} == {"schemes", "controls", "masks", "ablations", "second controls"}
    judged = judge_contrasts(results)
    edges = [name for name in judged if "prefix bare - " in name]  # two per prefix cell, in the one family
    assert len(edges) == 2 * sum(key.endswith("|prefix") for key in results["cells"]) == 16
    assert all(judged[name]["p_holm"] is not None for name in edges)
    for name, row in judged.items():  # claimed only when every Holm scope gives the same verdict
        verdicts = set(row["scopes"].values())
        assert len(row["scopes"]) == (0 if not row["learned"] else 2 if third_session(name) else 3)
        assert (row["verdict"] == "scope-dependent") == (len(verdicts) > 1)
        assert len(verdicts) != 1 or row["verdict"] == verdicts.pop()
    live = [row for row in judged.values() if row["learned"]]
    assert live and all(row["p_holm_list"] <= row["p_holm"] + 1e-12 for row in live)
    for row in judged.values():  # Holm counts only the comparisons the gate lets through
        assert (row["p_holm"] is None) == (row["verdict"] == "not learned in range")
        if row["p_holm"] is not None:
            assert row["p_holm"] <= min(1.0, len(live) * row["p"]) + 1e-12


def test_the_summary_draws_every_interval_and_the_ceiling_only_on_the_encoder_s_alibi_row():
    rng = np.random.default_rng(1)
    table = {}
    for scheme in SCHEMES:
        for mask in MASKS:
            for task in TASKS:
                for part in ((16, "in"), (64, "past")):
                    mean = float(rng.uniform(0.2, 0.8))
                    table[(scheme, mask, task, *part)] = (mean, mean - 0.1, mean + 0.05)
    fig = accuracy_summary(table, chance=1 / 15, ceiling=0.53)
    panels = fig.axes
    assert len(panels) == len(MASKS) * len(TASKS)
    for ax, (mask, task) in zip(panels, [(m, t) for m in MASKS for t in TASKS], strict=True):
        dashed = [line for line in ax.lines if line.get_linestyle() == "--"]
        assert len(dashed) == (mask == "bidirectional")
        if dashed:
            y = list(SCHEMES).index("alibi")
            assert list(dashed[0].get_xdata()) == [0.53, 0.53] and min(dashed[0].get_ydata()) > y - 0.5
        means = sorted(round(c.lines[0].get_xdata()[0], 6) for c in ax.containers)
        expected = sorted(round(table[(s, mask, task, *p)][0], 6) for s in SCHEMES for p in ((16, "in"), (64, "past")))
        assert means == expected
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts == ["before L, at L", "past L, at 4L", "chance", "ceiling of symmetric ALiBi (encoder)"]
