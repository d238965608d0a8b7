"""Train the tiny transformer on order tasks, test it on longer inputs, sweep schemes x tasks x seeds (train it).

`python -m helpers.training` (or `make experiments`) regenerates helpers/data/train_positions_results.json,
which ships inside the package: the chapter reads it wherever helpers is installed (Colab's wheel included).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from torch.nn import functional as F

from helpers import validation
from helpers.plots import LINE_STYLES, MARKERS, OKABE_ITO
from helpers.position_schemes import SCHEMES, TinyTransformer

__all__ = ["TrainConfig", "make_batch", "train", "accuracy", "load_results", "summarise", "clear_gap",
           "accuracy_curves", "row_norms_figure"]

RESULTS_PATH = Path(__file__).resolve().parent / "data" / "train_positions_results.json"
TASKS = ("copy-back", "position-3")
IGNORE = -100  # cross_entropy's ignore_index: positions with no answer


@dataclass(frozen=True)
class TrainConfig:
    """The sizes of one training run; the chapter prints them."""

    vocab_size: int = 16  # ids 1..15 are symbols; 0 is BERT's padding id, never drawn
    hidden: int = 32
    heads: int = 4
    layers: int = 2
    train_length: int = 16  # L: training lengths are drawn from shift + 2 .. L
    shift: int = 3  # k for copy-back, the position p for position-3
    steps: int = 400
    batch_size: int = 32
    lr: float = 3e-3
    test_lengths: tuple[int, ...] = (16, 32, 64)  # L, 2L, 4L
    test_batches: int = 4


def make_batch(task: str, batch_size: int, length: int, config: TrainConfig,
               generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Random symbols and the answer at every position: ids (batch, length), targets (batch, length).

    copy-back: the symbol `shift` places back; position-3: the symbol at position `shift`. No answer before it."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}.")
    length = validation.integer("length", length, minimum=config.shift + 1)
    ids = torch.randint(1, config.vocab_size, (batch_size, length), generator=generator)
    targets = torch.full_like(ids, IGNORE)
    k = config.shift
    if task == "copy-back":
        targets[:, k:] = ids[:, :-k]
    else:
        targets[:, k:] = ids[:, k: k + 1]
    return ids, targets


def train(scheme: str, task: str, seed: int, config: TrainConfig = TrainConfig()) -> TinyTransformer:
    """Adam on cross-entropy, one random length <= L per step; seeded, deterministic on one CPU."""
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(seed)
    model = TinyTransformer(scheme, config.vocab_size, config.hidden, config.heads, config.layers,
                            max_positions=max(config.test_lengths))
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)  # no weight decay: unused rows stay put
    for _ in range(config.steps):
        length = int(torch.randint(config.shift + 2, config.train_length + 1, (1,), generator=generator))
        ids, targets = make_batch(task, config.batch_size, length, config, generator)
        loss = F.cross_entropy(model(ids).flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


@torch.no_grad()
def accuracy(model: TinyTransformer, task: str, length: int, config: TrainConfig = TrainConfig(),
             seed: int = 1234) -> float:
    """Share of answered positions predicted right, on fresh sequences of one length."""
    generator = torch.Generator().manual_seed(seed)
    right = total = 0
    for _ in range(config.test_batches):
        ids, targets = make_batch(task, config.batch_size, length, config, generator)
        answered = targets != IGNORE
        right += int((model(ids).argmax(-1) == targets)[answered].sum())
        total += int(answered.sum())
    return right / total


def run_cell(scheme: str, task: str, seed: int, config: TrainConfig = TrainConfig()) -> dict[str, float]:
    """Train one model, return its accuracy at each test length: {"16": ..., "32": ..., "64": ...}."""
    model = train(scheme, task, seed, config)
    return {str(n): accuracy(model, task, n, config) for n in config.test_lengths}


def _one_thread_cell(cell: tuple) -> dict[str, float]:
    torch.set_num_threads(1)
    return run_cell(*cell)


def sweep(schemes=tuple(SCHEMES), tasks=TASKS, seeds=(0, 1, 2), config: TrainConfig = TrainConfig(),
          jobs: int = 1) -> dict:
    """Every scheme x task x seed: {"config": ..., "accuracy": {task: {scheme: {length: [per seed]}}}}.

    Cells are independent and seeded, so `jobs` processes give the same numbers as one."""
    cells = [(scheme, task, seed, config) for task in tasks for scheme in schemes for seed in seeds]
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        results = pool.map(_one_thread_cell, cells)
    table = {task: {scheme: {str(n): [] for n in config.test_lengths} for scheme in schemes} for task in tasks}
    for (scheme, task, _, _), result in zip(cells, results, strict=True):
        for length, value in result.items():
            table[task][scheme][length].append(value)
    return {"config": asdict(config), "seeds": list(seeds), "accuracy": table}


def load_results(path: Path = RESULTS_PATH) -> dict:
    """The stored sweep, as `sweep` wrote it."""
    return json.loads(Path(path).read_text())


def summarise(results: dict) -> dict[tuple[str, str, int], tuple[float, float]]:
    """(task, scheme, length) -> (mean, standard deviation over seeds) of the accuracy."""
    return {(task, scheme, int(length)): (statistics.mean(values), statistics.stdev(values))
            for task, by_scheme in results["accuracy"].items()
            for scheme, by_length in by_scheme.items() for length, values in by_length.items()}


def clear_gap(summary: dict, first: tuple, second: tuple, times: float = 3.0) -> tuple[float, bool]:
    """Mean accuracy of cell `first` minus cell `second`, and whether it exceeds `times` the larger seed spread
    (and 0.05, a floor for spreads near zero)."""
    (mean_a, spread_a), (mean_b, spread_b) = summary[first], summary[second]
    gap = mean_a - mean_b
    return gap, bool(gap > max(times * max(spread_a, spread_b), 0.05))


def accuracy_curves(summary: dict, tasks=TASKS, schemes=tuple(SCHEMES)):
    """Accuracy against test length, one panel per task, one line per scheme (mean, bars: seed spread)."""
    fig, axes = plt.subplots(1, len(tasks), figsize=(8.0, 3.4), sharey=True, layout="constrained")
    for ax, task in zip(axes, tasks, strict=True):
        for i, scheme in enumerate(schemes):
            lengths = sorted(n for (t, s, n) in summary if t == task and s == scheme)
            means, spreads = zip(*(summary[task, scheme, n] for n in lengths), strict=True)
            ax.errorbar(lengths, means, yerr=spreads, label=scheme, color=OKABE_ITO[i], marker=MARKERS[i],
                        linestyle=LINE_STYLES[i % len(LINE_STYLES)], capsize=3)
        ax.set(title=task, xlabel="test length (tokens)", xscale="log", ylim=(0, 1.05))
        ax.set_xticks(lengths, [str(n) for n in lengths])
        ax.minorticks_off()
    axes[0].set_ylabel("accuracy")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside right center", fontsize=8, frameon=False)
    return fig


def row_norms_figure(norms, initial_norms, train_length: int):
    """Norm of each learned position row after training and at initialisation; a dashed line at L."""
    fig, ax = plt.subplots(figsize=(8.0, 3.0))
    positions = range(len(norms))
    ax.plot(positions, initial_norms, color=OKABE_ITO[1], linestyle="--", marker="s", markersize=3,
            label="at initialisation")
    ax.plot(positions, norms, color=OKABE_ITO[0], marker="o", markersize=3, label="after training")
    ax.axvline(train_length - 0.5, color="#6b6b6b", linestyle=":")
    ax.annotate("training length L", (train_length, max(norms.max(), initial_norms.max())), fontsize=9)
    ax.set(xlabel="position", ylabel="norm of the row", title="Learned position rows, trained and untrained")
    ax.legend(frameon=False, fontsize=8, loc="lower right")
    return fig


def main(argv=None) -> None:
    """CLI: run the whole sweep and write it as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS_PATH)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1, help="processes, one thread each")
    args = parser.parse_args(argv)
    results = sweep(seeds=tuple(range(args.seeds)), jobs=args.jobs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
