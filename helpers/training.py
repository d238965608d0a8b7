"""Train the tiny transformer on order tasks, score it on longer inputs, sweep the grid and its controls (train it).

`python -m helpers.training` (or `make experiments`) regenerates helpers/data/train_positions_results.json,
which ships inside the package: the chapter reads it wherever helpers is installed (Colab's wheel included).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from helpers import validation
from helpers.position_schemes import MASKS, SCHEMES, TinyTransformer
from helpers.position_stats import cell_key, trained_pair_share

__all__ = ["TrainConfig", "TASKS", "make_batch", "build", "train", "evaluate", "load_results"]

RESULTS_PATH = Path(__file__).resolve().parent / "data" / "train_positions_results.json"
TASKS = ("copy-back", "position-3")
IGNORE = -100  # cross_entropy's ignore_index: positions with no answer
# One change each from the base sizes: the ALiBi ablations and T5's shared table
VARIANTS = {"base": {}, "shared-table": {"shared_t5": True}, "t5-init": {"t5_init_std": 32 ** -0.5},
            "steep-slopes": {"alibi_steep": True}, "heads-8": {"heads": 8}, "blocks-3": {"layers": 3},
            "k-1": {"shift": 1}, "steps-800": {"steps": 800}, "directional": {"alibi_right": 4.0},
            "prefix": {"prefix": 4}, "mask-query": {"mask_rate": 0.15},
            "sparse-labels": {"mask_rate": 0.15, "mask_token": False}}
PREFIXED = ("learned", "rope", "t5", "alibi")  # the prefix control: the table against the relative schemes
EXTRA_SEED = 10 ** 6  # the second generator (prefix lengths, masked places) is seeded seed + this


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
    test_rows: int = 48  # fresh rows per test length, the same for every model
    test_seed: int = 1234
    shared_t5: bool = False  # the ablations below change one thing each (VARIANTS)
    t5_init_std: float | None = None
    alibi_steep: bool = False
    alibi_right: float = 1.0
    prefix: int = 0  # rows start with 0..prefix padding ids; the answers move with the content
    mask_rate: float = 0.0  # BERT's framing: this share of queries is a [MASK] id and only those are scored
    mask_token: bool = True  # False: the same sparse answers, the queries left as they are (the density alone)


def make_batch(task: str, batch_size: int, length: int, config: TrainConfig, generator: torch.Generator,
               extra: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Random symbols and the answer at every position: ids (batch, length), targets (batch, length).

    copy-back: the symbol `shift` places back; position-3: the symbol at position `shift`. No answer before it.
    With config.prefix, each row first gets r padding ids (r uniform on 0 .. prefix, drawn from `extra`) and
    counting starts after them: position-3's answer is the symbol at r + shift."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}.")
    length = validation.integer("length", length, minimum=config.shift + 1)
    ids = torch.randint(1, config.vocab_size, (batch_size, length), generator=generator)
    k = config.shift
    start = torch.zeros(batch_size, 1, dtype=torch.long)
    if config.prefix:  # the content keeps at least shift + 2 symbols
        most = max(0, min(config.prefix, length - k - 2))
        start = torch.randint(0, most + 1, (batch_size, 1), generator=generator if extra is None else extra)
    position = torch.arange(length)[None, :]
    ids = ids.masked_fill(position < start, 0)  # 0: the padding id, never a symbol
    source = (position - k if task == "copy-back" else start + k).expand(batch_size, length)
    answer = ids.gather(1, source.clamp(0, length - 1))
    return ids, torch.where(position - start >= k, answer, IGNORE)


def mask_queries(ids: torch.Tensor, targets: torch.Tensor, task: str, config: TrainConfig,
                 generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's framing: each answered query becomes the [MASK] id (vocab_size) with probability mask_rate; only
    those keep an answer, and only when the symbol they need was not masked too."""
    if config.prefix:
        raise ValueError("mask_rate with a prefix is not supported: position-3's symbol moves with the prefix")
    k = config.shift
    chosen = (torch.rand(ids.shape, generator=generator) < config.mask_rate) & (targets != IGNORE)
    lost = torch.zeros_like(chosen)  # the needed symbol is itself masked
    if task == "copy-back":
        lost[:, k:] = chosen[:, :-k]
    else:
        lost[:] = chosen[:, k: k + 1]
    return ids.masked_fill(chosen, config.vocab_size), targets.masked_fill(~chosen | lost, IGNORE)


def build(scheme: str, mask: str, config: TrainConfig) -> TinyTransformer:
    """The untrained model for one run (call torch.manual_seed first to fix its start)."""
    model = TinyTransformer(scheme, config.vocab_size, config.hidden, config.heads, config.layers,
                           max_positions=max(config.test_lengths), mask=mask, shared_t5=config.shared_t5,
                           t5_init_std=config.t5_init_std, alibi_steep=config.alibi_steep,
                           alibi_right=config.alibi_right)
    if config.mask_rate and config.mask_token:  # a [MASK] row (id vocab_size), drawn last: the rest is the base's
        words = model.embeddings.word_embeddings
        weight = torch.cat([words.weight.detach(), torch.randn(1, words.embedding_dim)])
        model.embeddings.word_embeddings = nn.Embedding.from_pretrained(weight, freeze=False,
                                                                        padding_idx=words.padding_idx)
    return model


def train(scheme: str, mask: str, task: str, seed: int, config: TrainConfig = TrainConfig()) -> TinyTransformer:
    """Adam on cross-entropy, one random length <= L per step; seeded, deterministic on one CPU.

    The same seed gives every scheme the same stream of training batches."""
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(seed)
    model = build(scheme, mask, config)
    generator = torch.Generator().manual_seed(seed)
    extra = torch.Generator().manual_seed(seed + EXTRA_SEED)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)  # no weight decay: unused rows stay put
    for _ in range(config.steps):
        length = int(torch.randint(config.shift + 2, config.train_length + 1, (1,), generator=generator))
        ids, targets = make_batch(task, config.batch_size, length, config, generator, extra)
        if config.mask_rate:
            masked, targets = mask_queries(ids, targets, task, config, extra)
            ids = masked if config.mask_token else ids
            if not (targets != IGNORE).any():
                continue
        loss = F.cross_entropy(model(ids).flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


@torch.no_grad()
def evaluate(model: TinyTransformer, task: str, config: TrainConfig = TrainConfig()) -> dict:
    """Right answers per test row, split where the claim needs them.

    {"16": {"in": [...]}, "32": {"in": [...], "past": [...]}, ..., "by_position": [...]}: "in" counts the
    query positions shift .. L-1 answered right in each row, "past" the positions L .. n-1; "by_position" counts,
    at the longest length, the rows answered right at each position. Every model meets the same rows. With a
    prefix, "in_n" counts each row's answered positions before L; with masked queries, one [MASK] at a time."""
    L, k = config.train_length, config.shift
    scores: dict = {}
    for n in config.test_lengths:
        generator = torch.Generator().manual_seed(config.test_seed + n)
        extra = torch.Generator().manual_seed(config.test_seed + n + EXTRA_SEED)
        ids, targets = make_batch(task, config.test_rows, n, config, generator, extra)
        if config.mask_rate and config.mask_token:
            guess = torch.stack([model(ids.index_fill(1, torch.tensor([i]), config.vocab_size))[:, i]
                                 for i in range(n)], dim=1)
        else:
            guess = model(ids)
        right = (guess.argmax(-1) == targets) & (targets != IGNORE)  # (rows, n)
        scores[str(n)] = {"in": right[:, k:L].sum(1).tolist()}
        if config.prefix:
            scores[str(n)]["in_n"] = (targets[:, :L] != IGNORE).sum(1).tolist()
        if n > L:
            scores[str(n)]["past"] = right[:, L:].sum(1).tolist()
        if n == max(config.test_lengths):
            scores["by_position"] = right.sum(0).tolist()
    return scores


def controls_for(scheme: str, task: str, config: TrainConfig, causal: bool) -> dict[str, dict]:
    """The test-time controls a cell is scored under besides "plain" (one change each, same weights)."""
    controls: dict[str, dict] = {"plain": {}}
    if scheme in ("t5", "rope", "alibi") and task == "copy-back":
        controls["window"] = {"window": config.train_length}  # no offset training never saw
        controls["far"] = {"far": (config.train_length, config.shift)}  # no more keys than training had
    if scheme == "t5":  # every offset clipped to the longest one training met in at least 1% of its pairs
        share = trained_pair_share(config.train_length, config.shift, causal)
        controls["clamp"] = {"t5_clamp": int((share >= 0.01).nonzero().max())}
    return controls


def run_cell(scheme: str, mask: str, task: str, variant: str, seed: int,
             config: TrainConfig = TrainConfig()) -> dict[str, dict]:
    """Train one model, score it plainly and under each of its test-time controls."""
    config = dataclasses.replace(config, **VARIANTS[variant])
    model = train(scheme, mask, task, seed, config)
    scored = {}
    for control, settings in controls_for(scheme, task, config, mask == "causal").items():
        model.set_controls(**settings)
        scored[control] = evaluate(model, task, config)
    model.set_controls()
    return scored


def sweep_cells() -> list[tuple[str, str, str, str]]:
    """Every (scheme, mask, task, variant) the sweep trains: the grid, then T5's and ALiBi's one-change ablations."""
    cells = [(s, m, t, "base") for t in TASKS for m in MASKS for s in SCHEMES]
    cells += [("t5", "causal", "copy-back", "shared-table")] + [("t5", m, "copy-back", "t5-init") for m in MASKS]
    cells += [("alibi", "bidirectional", "copy-back", "directional")]
    cells += [("alibi", "causal", "copy-back", v) for v in ("steep-slopes", "heads-8", "blocks-3", "k-1",
                                                             "steps-800")]
    cells += [(s, m, "position-3", "prefix") for m in MASKS for s in PREFIXED]
    return cells + [("learned", "bidirectional", "copy-back", v) for v in ("mask-query", "sparse-labels")]


def _one_thread_job(job: tuple) -> tuple:
    torch.set_num_threads(1)
    return job[:5], run_cell(*job)


def _stored(previous: dict | None) -> dict:
    """The (scheme, mask, task, variant, seed) jobs of an earlier sweep, with their scores."""
    done = {}
    for key, controls in (previous or {"cells": {}})["cells"].items():
        for index, seed in enumerate(previous["seeds"]):
            if len(controls["plain"]) > index:
                done[(*key.split("|"), seed)] = {name: scored[index] for name, scored in controls.items()}
    return done


def sweep(cells=None, seeds=range(8), config: TrainConfig = TrainConfig(), jobs: int = 1,
          log: Path | None = None, previous: dict | None = None) -> dict:
    """Every cell x seed: {"config", "seeds", "variants", "cells": {key: {control: [per seed scores]}}}.

    Jobs are independent and seeded, so `jobs` processes give the same numbers as one; `log` gets one line per
    finished job (a partial sweep can be read back); jobs found in `previous` (an earlier sweep with the same
    config and code) are not run again."""
    cells = sweep_cells() if cells is None else cells
    seeds = list(seeds)
    if previous is not None:
        now = json.loads(json.dumps(asdict(config)))
        if any(now.get(name) != value for name, value in previous["config"].items()):
            raise ValueError(f"resume only from a sweep with the same config; it had {previous['config']}")
    done = _stored(previous)
    work = [(*cell, seed, config) for cell in cells for seed in seeds if (*cell, seed) not in done]
    cost = {"blocks-3": 1.5, "steps-800": 2}  # the longest first keeps both processes busy to the end
    work.sort(key=lambda job: -cost.get(job[3], 1))
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        for job, scores in pool.imap_unordered(_one_thread_job, work):
            done[job] = scores
            if log is not None:
                with open(log, "a") as out:
                    out.write(json.dumps([job, scores]) + "\n")
    table: dict = {}
    for cell in cells:
        for seed in seeds:
            for control, scores in done.get((*cell, seed), {}).items():
                table.setdefault(cell_key(*cell), {}).setdefault(control, []).append(scores)
    return {"config": asdict(config), "seeds": seeds, "variants": VARIANTS, "cells": table}


def load_results(path: Path = RESULTS_PATH) -> dict:
    """The stored sweep, as `sweep` wrote it."""
    return json.loads(Path(path).read_text())


def main(argv=None) -> None:
    """CLI: run the whole sweep and write it as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS_PATH)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=1, help="processes, one thread each")
    parser.add_argument("--resume", type=Path, help="an earlier results file: its runs are kept, not redone")
    args = parser.parse_args(argv)
    log = args.out.with_suffix(".log.jsonl")
    previous = load_results(args.resume) if args.resume else None
    results = sweep(seeds=range(args.seeds), jobs=args.jobs, log=log, previous=previous)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, separators=(",", ":")) + "\n")
    log.unlink(missing_ok=True)  # no log when every job came from --resume
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
