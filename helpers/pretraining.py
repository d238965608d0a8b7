"""Pre-train a tiny BERT with masked language modelling on text that ships offline, and measure its position table.

Taught in "Pre-train a tiny BERT" (book/pretrain_positions.ipynb). `python -m helpers.pretraining` (or
`make experiments`) regenerates helpers/data/pretrain_positions_results.json: seeds x (ordered, shuffled) x
checkpoints of training, each with the table's band and curve measures (helpers.pretraining_stats).
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import multiprocessing
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch.nn import functional as F

from helpers import validation
from helpers.pretraining_stats import table_structure

__all__ = ["PretrainConfig", "sklearn_prose", "compact_tokenizer", "split_corpus", "windows", "tiny_bert",
           "masked_lm_loss", "pretrain", "load_pretraining_results"]

RESULTS_PATH = Path(__file__).resolve().parent / "data" / "pretrain_positions_results.json"
CONDITIONS = ("ordered", "shuffled")
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# Lines of a docstring that are code or markup, not prose: doctests, rst directives, section underlines,
# and numpydoc's "name : type" parameter lines.
_NOT_PROSE = re.compile(r"^\s*(>>>|\.\.\.|\.\. |[-=~^]{3,})|^\S[^:]* : ")


@dataclass(frozen=True)
class PretrainConfig:
    """The sizes of one pre-training run; the chapter prints them."""

    hidden: int = 64
    layers: int = 2
    heads: int = 4
    length: int = 32  # L: every training sequence is [CLS] + L - 2 tokens + [SEP]
    table_rows: int = 64  # max_position_embeddings: rows L..table_rows-1 are never looked up
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 0.01  # BERT's, not on LayerNorm weights or biases (Devlin et al. 2019, appendix A.2)
    warmup: int = 50  # steps of linear warm-up to lr, then linear decay to 0 at the last checkpoint
    checkpoints: tuple[int, ...] = (0, 100, 250, 500, 750, 1000)  # the last is the number of steps
    mlm_probability: float = 0.15
    held_out_every: int = 20  # documents 10, 30, 50, ... are held out, never trained on
    held_out_masks: int = 3  # each held-out window is scored under this many fixed maskings


def sklearn_prose() -> list[str]:
    """scikit-learn's module and class docstrings and dataset descriptions, code and markup dropped ("The text")."""
    import sklearn

    root = Path(sklearn.__file__).parent
    texts = []
    for path in sorted(root.rglob("*.py")):
        if "tests" in path.parts or "externals" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef)) and (doc := ast.get_docstring(node)):
                texts.append(doc.split("Examples\n--------")[0])
    texts += [path.read_text(encoding="utf-8") for path in sorted((root / "datasets" / "descr").glob("*.rst"))]
    prose = (" ".join(line.strip() for line in text.splitlines() if line.strip() and not _NOT_PROSE.match(line))
             for text in texts)
    return [doc for doc in prose if doc]


def compact_tokenizer(tokenizer, documents: list[str]):
    """The packaged WordPiece keeping only the tokens the documents use; and their ids in it ("The text")."""
    from transformers import BertTokenizer
    from transformers.utils import logging

    if not isinstance(documents, list) or not documents or not all(isinstance(d, str) for d in documents):
        raise TypeError(f"documents must be a non-empty list of str, got {type(documents).__name__}.")
    if not hasattr(tokenizer, "convert_ids_to_tokens") or getattr(tokenizer, "vocab", None) is None:
        raise TypeError(f"tokenizer must be a WordPiece tokenizer with a vocab, got {type(tokenizer).__name__}.")
    level = logging.get_verbosity()
    logging.set_verbosity_error()  # documents longer than the model reads are fine here: they are cut later
    try:
        packaged = tokenizer(documents, add_special_tokens=False)["input_ids"]  # one list of ids per document
    finally:
        logging.set_verbosity(level)
    used = sorted({i for ids in packaged for i in ids})
    kept = list(SPECIALS) + [t for t in tokenizer.convert_ids_to_tokens(used) if t not in SPECIALS]
    compact = BertTokenizer(vocab={token: i for i, token in enumerate(kept)},
                            do_lower_case=tokenizer.do_lower_case, model_max_length=10**9)
    vocab = compact.vocab  # read once: each read of .vocab builds the whole dict again
    remap = {old: vocab[token] for old, token in zip(used, tokenizer.convert_ids_to_tokens(used), strict=True)}
    return compact, [[remap[i] for i in ids] for ids in packaged]


def split_corpus(ids: list[list[int]], every: int = PretrainConfig.held_out_every):
    """Documents every//2, every//2 + every, ... held out, the rest trained on: (training stream, held-out stream,
    held-out document indices) ("The text")."""
    every = validation.integer("every", every, minimum=2)
    if not isinstance(ids, list) or len(ids) < every:
        raise ValueError(f"ids must be a list of at least every={every} documents' token ids, got "
                         f"{len(ids) if isinstance(ids, list) else type(ids).__name__}.")
    held = list(range(every // 2, len(ids), every))
    train = [i for doc, d in enumerate(ids) if doc % every != every // 2 for i in d]
    return (torch.tensor(train, dtype=torch.long), torch.tensor([i for d in held for i in ids[d]], dtype=torch.long),
            held)


def windows(stream: torch.Tensor, starts: torch.Tensor, length: int, cls_id: int, sep_id: int) -> torch.Tensor:
    """[CLS], the length - 2 tokens of `stream` from each start, [SEP]: (len(starts), length) ("The text")."""
    length = validation.integer("length", length, minimum=3)
    if not isinstance(stream, torch.Tensor) or stream.dim() != 1:
        raise TypeError(f"stream must be a 1-D tensor of token ids, got {type(stream).__name__}.")
    if len(starts) and (int(starts.min()) < 0 or int(starts.max()) + length - 2 > len(stream)):
        raise ValueError(f"every start must leave {length - 2} tokens in a stream of {len(stream)}.")
    body = stream[starts[:, None] + torch.arange(length - 2)]  # (windows, length - 2)
    ends = torch.full((len(starts), 1), cls_id), torch.full((len(starts), 1), sep_id)
    return torch.cat([ends[0], body, ends[1]], dim=1)


def tiny_bert(vocab_size: int, config: PretrainConfig = PretrainConfig(), seed: int = 0):
    """BertForMaskedLM with a small BertConfig and learned absolute positions, initialised from `seed`."""
    from transformers import BertConfig, BertForMaskedLM

    vocab_size = validation.integer("vocab_size", vocab_size, minimum=len(SPECIALS))
    if config.table_rows < config.length:
        raise ValueError(f"table_rows ({config.table_rows}) must be at least the length L ({config.length}).")
    bert_config = BertConfig(vocab_size=vocab_size, hidden_size=config.hidden, num_hidden_layers=config.layers,
                             num_attention_heads=config.heads, intermediate_size=4 * config.hidden,
                             max_position_embeddings=config.table_rows, type_vocab_size=2, pad_token_id=0)
    torch.manual_seed(validation.integer("seed", seed, minimum=0))
    return BertForMaskedLM(bert_config)


def shuffle_tokens(batch: torch.Tensor, generator: torch.Generator, *more: torch.Tensor):
    """Each row's tokens between [CLS] and [SEP] in a random order of their own: no order left ("The control").
    Tensors in `more` (e.g. the labels of a masked batch) get the same permutation; then a tuple is returned."""
    if not isinstance(batch, torch.Tensor) or batch.dim() != 2 or batch.shape[1] < 3:
        raise ValueError("batch must be a (rows, length) tensor of ids with length >= 3, got "
                         f"{tuple(batch.shape) if isinstance(batch, torch.Tensor) else type(batch).__name__}.")
    if any(not isinstance(t, torch.Tensor) or t.shape != batch.shape for t in more):
        raise ValueError(f"every tensor in more must have the batch's shape {tuple(batch.shape)}.")
    order = torch.argsort(torch.rand(batch[:, 1:-1].shape, generator=generator), dim=1)  # (rows, length - 2)
    permuted = [torch.cat([t[:, :1], t[:, 1:-1].gather(1, order), t[:, -1:]], dim=1) for t in (batch, *more)]
    return tuple(permuted) if more else permuted[0]


def unigram_loss(train: torch.Tensor, labels: torch.Tensor, vocab_size: int) -> float:
    """Cross-entropy (nats) of the labels under the training stream's token frequencies, add-1/2 smoothed: the loss
    of a model that knows only how often each token occurs ("Pre-training live")."""
    vocab_size = validation.integer("vocab_size", vocab_size, minimum=1)
    if not isinstance(train, torch.Tensor) or train.dim() != 1 or not isinstance(labels, torch.Tensor):
        raise TypeError(f"train must be a 1-D tensor of ids and labels a tensor, got {type(train).__name__} and "
                        f"{type(labels).__name__}.")
    scored = labels[labels != -100]
    if not len(scored) or int(scored.max()) >= vocab_size or int(train.max()) >= vocab_size:
        raise ValueError(f"labels must hold at least one id and every id must be below vocab_size={vocab_size}.")
    counts = torch.bincount(train, minlength=vocab_size).double() + 0.5
    return float(-torch.log(counts[scored] / counts.sum()).mean())


def masked_lm_loss(model, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """BertForMaskedLM's loss, scoring only the masked positions (labels != -100) ("The objective")."""
    hidden = model.bert(input_ids=input_ids).last_hidden_state  # (batch, length, hidden)
    chosen = labels != -100
    return F.cross_entropy(model.cls(hidden[chosen]), labels[chosen])  # logits only where there is an answer


def _optimiser(model, config: PretrainConfig):
    """AdamW with BERT's decay (none on LayerNorm and biases), linear warm-up then linear decay to 0."""
    no_decay = [p for n, p in model.named_parameters() if "LayerNorm" in n or n.endswith("bias")]
    decay = [p for n, p in model.named_parameters() if not ("LayerNorm" in n or n.endswith("bias"))]
    optimiser = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=config.lr)
    steps, warm = max(config.checkpoints), config.warmup
    return optimiser, torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda done: min((done + 1) / warm, max(0.0, (steps - done) / max(1, steps - warm))))


def pretrain(train_part: torch.Tensor, held_part: torch.Tensor, tokenizer, config: PretrainConfig = PretrainConfig(),
             seed: int = 0, shuffled: bool = False, stop: int | None = None):
    """Pre-train on `train_part` from `seed` (up to step `stop`, same schedule), measuring the table and the losses on
    `held_part` at each checkpoint: (model, records) ("Pre-training live")."""
    from transformers import DataCollatorForLanguageModeling

    for name, part in (("train_part", train_part), ("held_part", held_part)):
        if not isinstance(part, torch.Tensor) or part.dim() != 1 or len(part) < 4 * (config.length - 2):
            raise ValueError(f"{name} must be a 1-D tensor of at least 4 windows' ids, got "
                             f"{tuple(getattr(part, 'shape', ())) or type(part).__name__}.")
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    model = tiny_bert(len(tokenizer), config, seed)  # seeds torch's global RNG: dropout and masking draw from it
    start = model.bert.embeddings.position_embeddings.weight.detach().clone()
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=config.mlm_probability)
    held = held_out_batches(held_part, tokenizer, config)
    optimiser, schedule = _optimiser(model, config)
    batches, shuffles = (torch.Generator().manual_seed(seed + offset) for offset in (1000, 2000))
    records, trained = [_record(model, start, held, config, 0, [])], []
    stop = max(config.checkpoints) if stop is None else validation.integer("stop", stop, minimum=0)
    for step in range(1, stop + 1):
        starts = torch.randint(len(train_part) - config.length + 3, (config.batch_size,), generator=batches)
        batch = windows(train_part, starts, config.length, cls_id, sep_id)  # random cut points every step
        if shuffled:
            batch = shuffle_tokens(batch, shuffles)
        masked = collator(list(batch))
        model.train()
        loss = masked_lm_loss(model, masked["input_ids"], masked["labels"])
        loss.backward()
        trained.append(loss.item())
        optimiser.step()
        schedule.step()
        optimiser.zero_grad()
        if step in config.checkpoints:
            records.append(_record(model, start, held, config, step, trained[-50:]))
    return model.eval(), records


def held_out_batches(held_part: torch.Tensor, tokenizer, config: PretrainConfig = PretrainConfig()) -> dict:
    """The held-out windows, masked `held_out_masks` times with fixed seeds, as written and with each window's tokens
    permuted after masking (same scored tokens, same inputs, other places): {"written": batch, "permuted": batch,
    "window": each row's window index}."""
    from transformers import DataCollatorForLanguageModeling

    starts = torch.arange(0, len(held_part) - config.length + 3, config.length - 2)
    rows = windows(held_part, starts, config.length, tokenizer.cls_token_id, tokenizer.sep_token_id)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=config.mlm_probability)
    state, parts = torch.random.get_rng_state(), []
    for m in range(config.held_out_masks):
        torch.manual_seed(12345 + m)
        batch = collator(list(rows))
        parts.append((batch["input_ids"], batch["labels"],
                      *shuffle_tokens(batch["input_ids"], torch.Generator().manual_seed(12345 + m), batch["labels"])))
    torch.random.set_rng_state(state)  # training's random draws stay the same with or without these batches
    inputs, labels, p_inputs, p_labels = (torch.cat(t) for t in zip(*parts, strict=True))
    return {"written": {"input_ids": inputs, "labels": labels}, "permuted": {"input_ids": p_inputs, "labels": p_labels},
            "window": torch.arange(len(rows)).repeat(config.held_out_masks), "mask_id": tokenizer.mask_token_id}


def _token_losses(model, batch: dict, mask_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per scored token, in row order: the loss, whether its input was [MASK], its row (eval mode, no gradient)."""
    losses, masked, rows = [], [], []
    with torch.no_grad():
        for first in range(0, len(batch["labels"]), 256):
            ids, labels = batch["input_ids"][first:first + 256], batch["labels"][first:first + 256]
            chosen = labels != -100
            hidden = model.bert(input_ids=ids).last_hidden_state[chosen]
            losses.append(F.cross_entropy(model.cls(hidden), labels[chosen], reduction="none"))
            masked.append(ids[chosen] == mask_id)
            rows.append(chosen.nonzero()[:, 0] + first)
    return torch.cat(losses).double(), torch.cat(masked), torch.cat(rows)


def _record(model, start: torch.Tensor, held: dict, config: PretrainConfig, step: int, trained: list) -> dict:
    """One checkpoint: held-out losses (all scored tokens; [MASK] inputs only) and order use, the training loss of the
    last 50 steps, table_structure of rows 1..L-2 and their movement; per-window order use at the last step."""
    model.eval()
    (loss, masked, rows), (p_loss, p_masked, p_rows) = (_token_losses(model, held[k], held["mask_id"])
                                                         for k in ("written", "permuted"))
    table = model.bert.embeddings.position_embeddings.weight.detach()
    inner = slice(1, config.length - 1)  # rows 1..L-2: [CLS] always sits at 0 and [SEP] at L - 1
    moved = torch.linalg.vector_norm((table - start)[inner].double(), dim=1).mean()
    record = {"step": step, "held_out_loss": float(loss.mean()), "held_out_loss_mask": float(loss[masked].mean()),
              "order_use": float(p_loss[p_masked].mean() - loss[masked].mean()),
              "order_use_all": float(p_loss.mean() - loss.mean()),
              "train_loss": float(sum(trained) / len(trained)) if trained else None, "moved": float(moved),
              "norm": float(torch.linalg.vector_norm(table[inner].double(), dim=1).mean()),
              **table_structure(table[inner])}
    if step == max(config.checkpoints):  # per window, [MASK] inputs only: for an interval over held-out windows
        window = held["window"]
        n = int(window.max()) + 1
        sums = [torch.zeros(n, dtype=torch.float64).index_add_(0, window[r[m]], x[m])
                for x, m, r in ((loss, masked, rows), (p_loss, p_masked, p_rows))]
        count = torch.zeros(n, dtype=torch.float64).index_add_(0, window[rows[masked]], torch.ones(int(masked.sum()),
                                                                                                dtype=torch.float64))
        record["window_order_use"] = [round(float(v), 5) if c else None
                                      for v, c in zip((sums[1] - sums[0]) / count.clamp(min=1), count, strict=True)]
    return record


@functools.cache
def prepared(every: int = PretrainConfig.held_out_every):
    """The corpus's compact tokenizer, its training and held-out streams and the held-out documents' indices, built
    once per process ("The text")."""
    from helpers.checkpoint import load_bert

    _, tokenizer = load_bert()
    compact, ids = compact_tokenizer(tokenizer, sklearn_prose())
    return (compact, *split_corpus(ids, every))


def held_out_facts(config: PretrainConfig = PretrainConfig()) -> dict:
    """The held-out set's size, its documents (index, first words) and its unigram baselines in nats: on every scored
    token, on [MASK] inputs only, and the training stream's own entropy."""
    tokenizer, train, held_part, held_docs = prepared(config.held_out_every)
    held = held_out_batches(held_part, tokenizer, config)["written"]
    labels = held["labels"]
    mask_only = torch.where(held["input_ids"] == tokenizer.mask_token_id, labels, -100)
    frequencies = torch.bincount(train).double() / len(train)
    docs = sklearn_prose()
    return {"tokens": len(held_part), "windows": len(labels) // config.held_out_masks,
            "scored": int((labels != -100).sum()), "scored_mask": int((mask_only != -100).sum()),
            "unigram_loss": unigram_loss(train, labels, len(tokenizer)),
            "unigram_loss_mask": unigram_loss(train, mask_only, len(tokenizer)),
            "unigram_train": float(-(frequencies[frequencies > 0] * frequencies[frequencies > 0].log()).sum()),
            "documents": [[i, " ".join(docs[i].split()[:6])] for i in held_docs]}


def run(condition: str, seed: int, config: PretrainConfig = PretrainConfig(), stop: int | None = None) -> list[dict]:
    """One condition and seed of the sweep (up to step `stop`): its checkpoint records."""
    if condition not in CONDITIONS:
        raise ValueError(f"condition must be one of {CONDITIONS}, got {condition!r}.")
    tokenizer, train, held, _ = prepared(config.held_out_every)
    return pretrain(train, held, tokenizer, config, seed, shuffled=condition == "shuffled", stop=stop)[1]


def _one_thread_run(cell: tuple) -> list[dict]:
    torch.set_num_threads(1)
    return run(*cell)


def sweep(seeds=tuple(range(8)), config: PretrainConfig = PretrainConfig(), jobs: int = 1,
          out: Path | None = None) -> dict:
    """Every condition x seed, a seed's two conditions side by side: {"config", "held_out", "runs": {condition: {seed:
    records}}}. Each finished run is printed; with `out`, the seeds finished in both conditions are written there as
    they end, so a sweep cut short keeps its complete pairs."""
    cells = [(condition, seed, config) for seed in seeds for condition in CONDITIONS]
    results = {"config": asdict(config), "held_out": held_out_facts(config),  # the corpus is prepared before forking
               "runs": {condition: {} for condition in CONDITIONS}}
    begun, runs = time.time(), results["runs"]
    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        for (condition, seed, _), records in zip(cells, pool.imap(_one_thread_run, cells, chunksize=1), strict=True):
            runs[condition][str(seed)] = records
            print(f"{time.time() - begun:7.0f} s: {condition} seed {seed} done", flush=True)
            if out is not None and all(str(seed) in runs[c] for c in CONDITIONS):
                _write(results, out)
    return results


def _write(results: dict, out: Path) -> None:
    """The sweep's JSON, keeping only seeds finished in every condition."""
    done = set.intersection(*(set(r) for r in results["runs"].values()))
    kept = {**results, "runs": {c: {s: r for s, r in runs.items() if s in done} for c, runs in results["runs"].items()}}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(kept, indent=1) + "\n")


def load_pretraining_results(path: Path = RESULTS_PATH) -> dict:
    """The stored sweep (regenerate with `make experiments`)."""
    return json.loads(Path(path).read_text())


def main(argv=None) -> None:
    """CLI: run the sweep and write it as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS_PATH)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=1, help="processes, one thread each")
    args = parser.parse_args(argv)
    _write(sweep(seeds=tuple(range(args.seeds)), jobs=args.jobs, out=args.out), args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
