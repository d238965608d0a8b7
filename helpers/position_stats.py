"""Scoring the position sweep: accuracies by part of the input, paired bootstrap intervals, the claim rule (train it).

A cell of the results file holds, for each seed, the right answers per test row; every model met the same rows,
and the same seed gave every scheme the same start of its random stream and the same training batches, so two
cells are paired by (seed, row).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import stats

from helpers.relative_positions import t5_buckets

__all__ = ["CONTRAST_HEAD", "cell_key", "rates", "interval", "as_text", "judge_contrasts", "contrast_rows", "state",
           "untrained_bucket_share", "bare_rows", "scope_rows"]

CLAIM_GAP = 0.05  # the smallest gap the chapter calls a difference (three quarters of chance, 1/15)
RESAMPLES = 2000


def _positions(config: dict, length: int, part: str) -> int:
    if part == "in":
        return config["train_length"] - config["shift"]
    if part == "past":
        if length <= config["train_length"]:
            raise ValueError(f"a test length of {length} has no positions past L = {config['train_length']}")
        return length - config["train_length"]
    raise ValueError(f"part must be 'in' (positions shift .. L-1) or 'past' (L .. n-1), got {part!r}")


def cell_key(scheme: str, mask: str, task: str, variant: str = "base") -> str:
    """The results file's key of one cell: 'scheme|mask|task|variant'."""
    return "|".join((scheme, mask, task, variant))


def rates(results: dict, key: str, length: int, part: str, control: str = "plain") -> np.ndarray:
    """Accuracy of each (seed, test row) in one cell: (seeds, rows); part "in" (before L) or "past" (from L on)."""
    if key not in results["cells"]:
        raise KeyError(f"no cell {key!r} in the results; cells look like 'rope|causal|copy-back|base'")
    per_seed = results["cells"][key].get(control)
    if per_seed is None:
        raise KeyError(f"cell {key!r} has no control {control!r}: it has {sorted(results['cells'][key])}")
    config = dict(results["config"], **results["variants"][key.split("|")[3]])
    positions = _positions(config, length, part)  # checks part and length first
    counts = np.array([scores[str(length)][part] for scores in per_seed], dtype=float)
    totals = np.array([scores[str(length)].get(f"{part}_n", [positions] * counts.shape[1])
                       for scores in per_seed], dtype=float)
    return counts / totals  # with a prefix, each row has its own number of answered positions before L


def _bootstrap(matrix: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """Means of `resamples` two-way resamples: seeds and rows drawn with replacement, independently."""
    seeds, rows = matrix.shape
    rng = np.random.default_rng(seed)
    pick_seeds = rng.integers(0, seeds, (resamples, seeds))
    pick_rows = rng.integers(0, rows, (resamples, rows))
    return matrix[pick_seeds[:, :, None], pick_rows[:, None, :]].mean(axis=(1, 2))


def interval(matrix, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float, float]:
    """Mean of a (seeds, rows) matrix and its 95% two-way percentile bootstrap interval."""
    matrix = np.asarray(matrix, dtype=float)
    if matrix.ndim != 2 or min(matrix.shape) < 2:
        raise ValueError(f"pass a (seeds, rows) matrix with at least 2 of each, got shape {matrix.shape}")
    means = _bootstrap(matrix, resamples, seed)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(matrix.mean()), float(low), float(high)


def paired_gap(first, second, resamples: int = RESAMPLES, seed: int = 0) -> tuple[float, float, float]:
    """Mean of first - second, paired by (seed, row), and its 95% two-way bootstrap interval."""
    first, second = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if first.shape != second.shape:
        raise ValueError(f"paired cells need the same (seeds, rows), got {first.shape} and {second.shape}")
    return interval(first - second, resamples, seed)


def seed_test(first, second) -> tuple[float, float, float, float]:
    """Paired t over seeds (df = seeds - 1) on the per-seed mean difference: (gap, 95% low, high, p)."""
    first, second = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if first.shape != second.shape or first.ndim != 2 or first.shape[0] < 2:
        raise ValueError(f"pass two (seeds, rows) matrices of one shape, >= 2 seeds: {first.shape}, {second.shape}")
    per_seed = (first - second).mean(axis=1)
    gap, spread = float(per_seed.mean()), float(per_seed.std(ddof=1))
    if spread == 0.0:  # every seed gave the same difference: no spread to test against
        return gap, gap, gap, (1.0 if gap == 0.0 else 0.0)
    result = stats.ttest_1samp(per_seed, 0.0)
    low, high = result.confidence_interval(0.95)
    return gap, float(low), float(high), float(result.pvalue)


def holm(pvalues: dict) -> dict:
    """Holm's step-down adjustment of a family of p-values: {name: adjusted p}."""
    order = sorted(pvalues, key=pvalues.get)
    adjusted, running = {}, 0.0
    for rank, name in enumerate(order):
        running = max(running, min(1.0, (len(order) - rank) * pvalues[name]))
        adjusted[name] = running
    return adjusted


def verdict(gap: float, seed_interval: tuple[float, float], boot_interval: tuple[float, float],
            adjusted_p: float) -> str:
    """The claim rule: "higher"/"lower" when Holm's p < 0.05, the bootstrap interval excludes 0 and |gap| >=
    CLAIM_GAP; "about equal" when the seed interval lies inside +-CLAIM_GAP; otherwise "undecided"."""
    low, high = boot_interval
    if adjusted_p < 0.05 and (low > 0 or high < 0) and abs(gap) >= CLAIM_GAP:
        return "higher" if gap > 0 else "lower"
    if -CLAIM_GAP < seed_interval[0] and seed_interval[1] < CLAIM_GAP:
        return "about equal"
    return "undecided"


def untrained_bucket_share(length: int, train_length: int, causal: bool, num_buckets: int = 16,
                           max_distance: int = 64, past_only: bool = False) -> float:
    """Share of the (query, key) pairs a model sees at `length` whose T5 bucket no training pair reached (with
    past_only, of the pairs whose query is at train_length or later)."""
    for name, value in (("length", length), ("train_length", train_length)):
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 4096:
            raise ValueError(f"{name} must be an int from 1 to 4096, got {value!r}")
    offsets = torch.arange(length)[None, :] - torch.arange(length)[:, None]  # (query, key): key - query
    buckets = t5_buckets(offsets, not causal, num_buckets, max_distance)
    visible = offsets <= 0 if causal else torch.ones_like(offsets, dtype=torch.bool)
    trained = (offsets.abs() < train_length) & visible  # the pairs training lengths <= L contain
    untrained = ~torch.isin(buckets, buckets[trained]) & visible
    if past_only:
        untrained, visible = untrained[train_length:], visible[train_length:]  # rows are queries
    return float(untrained.sum() / visible.sum())


def trained_pair_share(train_length: int, shift: int, causal: bool) -> torch.Tensor:
    """Share of all training (query, key) pairs at each distance |key - query| = 0 .. L-1 (lengths uniform on
    shift + 2 .. L, as `train` draws them)."""
    lengths = torch.arange(shift + 2, train_length + 1)[:, None]  # (lengths, 1)
    distance = torch.arange(train_length)[None, :]  # (1, L)
    pairs = (lengths - distance).clamp(min=0).float()  # pairs at each distance, one direction
    if not causal:
        pairs[:, 1:] *= 2  # keys on both sides
    return pairs.sum(0) / pairs.sum()


def contrast_list(results: dict) -> list[tuple[str, tuple[str, str], tuple[str, str], int | tuple, str]]:
    """The family of comparisons fixed before the sweep ran: (name, (cell, control), (cell, control), length or
    (first's length, second's), part). Schemes against the learned table past L; each control against its own
    model; encoder against decoder; each ablation against its base."""
    L = results["config"]["train_length"]
    tasks = sorted({key.split("|")[2] for key in results["cells"]})
    n4 = 4 * L
    family = []
    for mask in ("bidirectional", "causal"):
        for task in tasks:
            others = ("sinusoid", "t5", "alibi", "rope") + (("none",) if mask == "causal" else ())
            for scheme in others:
                family.append((f"{scheme} - learned | {mask} | {task} | past L at {n4}",
                               (cell_key(scheme, mask, task), "plain"), (cell_key("learned", mask, task), "plain"),
                               n4, "past"))
            for scheme in ("t5", "rope", "alibi"):
                for control in ("window", "far", "clamp"):
                    key = cell_key(scheme, mask, task)
                    if key in results["cells"] and control in results["cells"][key]:
                        family.append((f"{scheme} {control} - plain | {mask} | {task} | past L at {n4}",
                                       (key, control), (key, "plain"), n4, "past"))
    for task in tasks:
        for scheme in ("learned", "sinusoid", "t5", "alibi", "rope"):
            family.append((f"{scheme} encoder - decoder | {task} | past L at {n4}",
                           (cell_key(scheme, "bidirectional", task), "plain"),
                           (cell_key(scheme, "causal", task), "plain"), n4, "past"))
    ablations = [("alibi", "causal", v, L, "in") for v in ("steep-slopes", "heads-8", "blocks-3", "k-1", "steps-800")]
    ablations += [("alibi", "bidirectional", "directional", L, "in"), ("t5", "causal", "shared-table", n4, "past")]
    ablations += [("t5", mask, "t5-init", n4, "past") for mask in ("bidirectional", "causal")]
    for scheme, mask, variant, n, part in ablations:
        where = "past L" if part == "past" else "before L"
        family.append((f"{scheme} {variant} - base | {mask} | copy-back | {where} at {n}",
                       (cell_key(scheme, mask, "copy-back", variant), "plain"),
                       (cell_key(scheme, mask, "copy-back"), "plain"), n, part))
    for variant in ("base", "steep-slopes", "heads-8", "blocks-3", "steps-800"):  # does an ablation reach RoPE?
        family.append((f"rope - alibi {variant} | causal | copy-back | before L at {L}",
                       (cell_key("rope", "causal", "copy-back"), "plain"),
                       (cell_key("alibi", "causal", "copy-back", variant), "plain"), L, "in"))
    return family + _second_controls(results, L, n4)


def _second_controls(results: dict, L: int, n4: int) -> list:
    """The controls added in the second session, fixed before they ran: the prefix against position-3's base and
    the [MASK] query against copy-back's, each before L at L and past L at 4L."""
    family = []
    for scheme in ("learned", "rope", "t5", "alibi"):  # the prefix: relative schemes vs the learned table
        for mask in ("bidirectional", "causal"):
            prefixed, base = cell_key(scheme, mask, "position-3", "prefix"), cell_key(scheme, mask, "position-3")
            for n, part, where in ((L, "in", "before L"), (n4, "past", "past L")):
                if prefixed in results["cells"]:
                    family.append((f"{scheme} prefix - base | {mask} | position-3 | {where} at {n}",
                                   (prefixed, "plain"), (base, "plain"), n, part))
    for scheme in ("learned", "sinusoid"):  # the encoder's drop before L once the row is 4L long (third session)
        key = cell_key(scheme, "bidirectional", "copy-back")
        family.append((f"{scheme} at {n4} - at {L} | bidirectional | copy-back | before L", (key, "plain"),
                       (key, "plain"), (n4, L), "in"))
    masked, sparse, base = (cell_key("learned", "bidirectional", "copy-back", v)
                            for v in ("mask-query", "sparse-labels", "base"))
    for first, second, name in ((masked, sparse, "mask-query - sparse-labels"), (sparse, base, "sparse-labels - base")):
        for n in (L, n4):  # past L both are at chance by construction (untrained rows)
            if first in results["cells"] and second in results["cells"]:
                family.append((f"learned {name} | bidirectional | copy-back | before L at {n}",
                               (first, "plain"), (second, "plain"), n, "in"))
    return family


def family_of(name: str) -> str:
    """Which of the five lists a contrast belongs to (list-wise Holm, reported beside the primary verdict)."""
    head = name.split(" | ")[0]
    if "prefix" in head or "sparse-labels" in head:
        return "second controls"
    if head.endswith("- learned"):
        return "schemes"
    if head.endswith("- plain") or " - at " in head:
        return "controls"
    if "encoder - decoder" in head:
        return "masks"
    return "ablations"


LEARNED_IN_RANGE = 0.9  # the gate: a model scored past L must get at least this much right before L, at L


def judge_contrasts(results: dict) -> dict[str, dict]:
    """Every contrast of the family: gap, bootstrap and seed intervals, Holm-adjusted p over the whole family (the
    pre-registered rule, which gives the verdict) and within its list (reported only), and the verdict. A past-L
    contrast whose models get less than LEARNED_IN_RANGE right before L, at L, is "not learned in range"."""
    L = results["config"]["train_length"]
    rows = {}
    for name, (first, c1), (second, c2), n, part in contrast_list(results):
        a, b = _pair(results, (first, c1), (second, c2), n, part)
        gap, boot_low, boot_high = paired_gap(a, b)
        _, low, high, p = seed_test(a, b)
        in_range = min(rates(results, key, L, "in").mean() for key in (first, second))
        rows[name] = {"gap": gap, "boot": (boot_low, boot_high), "seeds": (low, high), "p": p,
                      "means": (a.mean(), b.mean()), "learned": part == "in" or in_range >= LEARNED_IN_RANGE}
    rows |= prefix_rows(results)
    live = {name: row["p"] for name, row in rows.items() if row["learned"]}  # Holm's m: the gated ones
    by_list = {}
    for family in {family_of(name) for name in live}:
        by_list |= holm({name: p for name, p in live.items() if family_of(name) == family})
    everything = holm(live)
    scopes = {"second session": holm({name: p for name, p in live.items() if not third_session(name)}),
              "now": everything, "all, ungated": holm({name: row["p"] for name, row in rows.items()})}
    for name, row in rows.items():
        row["p_holm"], row["p_holm_list"] = everything.get(name), by_list.get(name)
        row["scopes"] = {scope: verdict(row["gap"], row["seeds"], row["boot"], adjusted[name])
                         for scope, adjusted in scopes.items() if name in adjusted and row["learned"]}
        same = len(set(row["scopes"].values())) == 1
        row["verdict"] = ("not learned in range" if not row["learned"] else row["scopes"]["now"] if same
                          else "scope-dependent")
    return rows


THIRD_SESSION = ("bare - ", " - at ", "t5 prefix", "alibi prefix")  # joined the family before their runs


def third_session(name: str) -> bool:
    """Whether a contrast joined the family in the third session (the Holm scope of the second leaves it out)."""
    return any(word in name for word in THIRD_SESSION)


def scope_rows(judged: dict) -> list[list[str]]:
    """Table rows of the gated-through contrasts whose verdict differs between Holm scopes: name, cell, verdicts."""
    names = ["second session", "now", "all, ungated"]
    return [[*_plain_name(name), *(row["scopes"].get(scope, "-") for scope in names)]
            for name, row in judged.items() if row["verdict"] == "scope-dependent"]


def _pair(results: dict, first: tuple[str, str], second: tuple[str, str], n, part: str):
    """The two (seeds, rows) matrices of one contrast, cut to the seeds both have; n is a length or a pair."""
    n1, n2 = n if isinstance(n, tuple) else (n, n)
    a, b = rates(results, first[0], n1, part, first[1]), rates(results, second[0], n2, part, second[1])
    return a[: len(b)], b[: len(a)]  # seed i is the same seed in every cell


def _stratified(right: np.ndarray, bare: np.ndarray, resamples: int = RESAMPLES, seed: int = 0) -> tuple:
    """95% interval of bare-row minus marked-row accuracy: seeds resampled, and within them the bare rows and the
    marked rows each resampled on their own (two groups of different rows)."""
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, right.shape[0], (resamples, right.shape[0]))[:, :, None]
    means = [right[seeds, group[rng.integers(0, len(group), (resamples, 1, len(group)))]].mean(axis=(1, 2))
             for group in (np.flatnonzero(bare), np.flatnonzero(~bare))]
    return tuple(np.percentile(means[0] - means[1], [2.5, 97.5]))


def prefix_rows(results: dict) -> dict[str, dict]:
    """Two contrasts of the one family per prefix cell, before L at L: its bare-edge rows (r = 0) minus its marked
    rows (r > 0), and its bare rows minus the base model on the same rows (the same symbols: exactly paired)."""
    L, rows = results["config"]["train_length"], {}
    for key in (k for k in results["cells"] if k.endswith("|prefix")):
        scheme, mask, task, _ = key.split("|")
        bare = bare_rows(results, key)
        right, base = rates(results, key, L, "in"), rates(results, cell_key(scheme, mask, task), L, "in")
        split = np.stack([right[:, bare].mean(1), right[:, ~bare].mean(1)], axis=1)
        gap, low, high, p = seed_test(split[:, :1], split[:, 1:])
        rows[f"{scheme} prefix bare - marked | {mask} | {task} | before L at {L}"] = {
            "gap": gap, "boot": _stratified(right, bare), "seeds": (low, high), "p": p, "learned": True,
            "means": tuple(split.mean(axis=0))}
        a, b = right[:, bare], base[: len(right), bare]
        gap, low, high, p = seed_test(a, b)
        rows[f"{scheme} prefix bare - base | {mask} | {task} | before L at {L}"] = {
            "gap": gap, "boot": paired_gap(a, b)[1:], "seeds": (low, high), "p": p, "learned": True,
            "means": (a.mean(), b.mean())}
    return rows


def bare_rows(results: dict, key: str) -> np.ndarray:
    """The test rows of a prefix cell with no prefix (r = 0), as a (rows,) bool mask: every seed meets the same
    rows. A row's prefix is L - shift - its answered positions before L."""
    config = dict(results["config"], **results["variants"][key.split("|")[3]])
    L = config["train_length"]
    answered = np.array([scores[str(L)]["in_n"] for scores in results["cells"][key]["plain"]])
    if not (answered == answered[0]).all():
        raise ValueError(f"cell {key!r}: the seeds met different test rows")
    return (L - config["shift"] - answered[0]) == 0


def as_text(mean_low_high) -> str:
    """A mean and its interval as the chapter's tables print them: '0.52 (0.47-0.58)'."""
    mean, low, high = mean_low_high
    return f"{mean:.2f} ({low:.2f}-{high:.2f})"


DISPLAY = {"t5": "T5", "rope": "RoPE", "alibi": "ALiBi", "learned": "Learned", "sinusoid": "Sinusoid",
           "none": "No positions"}  # scheme names as the chapter's tables print them
CONTRAST_HEAD = ["contrast", "cell", "gap", "95% t interval", "seeds x rows", "Holm p", "list p", "verdict"]


def p_text(p: float | None) -> str:
    """A p-value to three decimals, '<0.001' below that; '-' for none (a comparison the gate left out)."""
    if p is None:
        return "-"
    return "<0.001" if p < 0.0005 else f"{p:.3f}"


def _plain_name(name: str) -> tuple[str, str]:
    """A contrast's name as the tables print it: (contrast, cell), scheme names capitalised, 4L for 64."""
    def plain(text: str) -> str:
        text = text.replace("bidirectional", "encoder").replace("causal", "decoder")
        text = " ".join(DISPLAY.get(word, word) for word in text.split(" "))
        return text.replace(" at 64", " at 4L").replace(" at 16", " at L")

    return plain(name.split(" | ")[0]), plain(" | ".join(name.split(" | ")[1:]))


def contrast_rows(judged: dict, words) -> list[list[str]]:
    """Table rows (CONTRAST_HEAD) of the judged contrasts whose name contains every one of `words`."""
    def gap(value: float) -> str:  # three decimals where two would round onto the claim threshold
        return f"{value:+.3f}" if round(abs(value), 2) == CLAIM_GAP else f"{value:+.2f}"

    return [[*_plain_name(name), gap(row["gap"]),
             f"{row['seeds'][0]:+.2f} to {row['seeds'][1]:+.2f}", f"{row['boot'][0]:+.2f} to {row['boot'][1]:+.2f}",
             p_text(row["p_holm"]),
             p_text(row["p_holm_list"]), row["verdict"]]
            for name, row in judged.items() if all(word in name for word in words)]


def state(judged: dict, name: str, contrast: str, expect: str, claim: str, contrary: str) -> None:
    """A finding from one judged contrast: it holds when the verdict is `expect`. claim and contrary may use {a},
    {b} (the two means), {lo}, {hi} (the t interval), {blo}, {bhi} (the two-way bootstrap's), {value} (the size of
    the gap) and {verdict}."""
    from helpers.findings import finding
    row = judged[contrast]
    told = (lambda ends: ends) if expect != "lower" else (lambda ends: (-ends[1], -ends[0]))  # as the gap is told
    (low, high), (boot_low, boot_high) = told(row["seeds"]), told(row["boot"])
    numbers = {"a": f"{row['means'][0]:.2f}", "b": f"{row['means'][1]:.2f}", "value": "{value}",
               "verdict": row["verdict"], "lo": f"{low:.2f}", "hi": f"{high:.2f}", "blo": f"{boot_low:.2f}",
               "bhi": f"{boot_high:.2f}"}
    finding(name, row["verdict"] == expect, f"{abs(row['gap']):.2f}", claim=claim.format(**numbers),
            contrary=contrary.format(**numbers))
