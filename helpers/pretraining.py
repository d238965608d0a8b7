"""Pre-train a tiny BERT with masked language modelling on text that ships offline, and measure its position table.

Taught in "Watch order emerge" (book/pretrain_positions.ipynb). `python -m helpers.pretraining` (or
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
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch.nn import functional as F

from helpers import validation
from helpers.pretraining_stats import table_structure

__all__ = ["PretrainConfig", "sklearn_prose", "compact_tokenizer", "windows", "tiny_bert",
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
    batch_size: int = 16
    lr: float = 1e-3
    weight_decay: float = 0.01  # BERT's, not on LayerNorm weights or biases (Devlin et al. 2019, appendix A.2)
    warmup: int = 50  # steps of linear warm-up to lr, then linear decay to 0 at the last checkpoint
    checkpoints: tuple[int, ...] = (0, 50, 100, 200, 300, 500, 750, 1000)  # the last is the number of steps
    mlm_probability: float = 0.15
    held_out_tokens: int = 32 * 30  # the end of the stream, never trained on: 32 fixed chunks for the held-out loss


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
    remap = {old: compact.vocab[token] for old, token in zip(used, tokenizer.convert_ids_to_tokens(used), strict=True)}
    return compact, [[remap[i] for i in ids] for ids in packaged]


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


def shuffle_tokens(batch: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Each row's tokens between [CLS] and [SEP] in a random order of their own: no order left ("The control")."""
    if not isinstance(batch, torch.Tensor) or batch.dim() != 2 or batch.shape[1] < 3:
        raise ValueError("batch must be a (rows, length) tensor of ids with length >= 3, got "
                         f"{tuple(batch.shape) if isinstance(batch, torch.Tensor) else type(batch).__name__}.")
    inner = batch[:, 1:-1]  # (rows, length - 2)
    order = torch.argsort(torch.rand(inner.shape, generator=generator), dim=1)
    return torch.cat([batch[:, :1], inner.gather(1, order), batch[:, -1:]], dim=1)


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


def pretrain(stream: torch.Tensor, tokenizer, config: PretrainConfig = PretrainConfig(), seed: int = 0,
             shuffled: bool = False, stop: int | None = None):
    """Pre-train from `seed` (up to step `stop`, same schedule), measuring the table at each checkpoint: (model,
    records) ("Pre-training live")."""
    from transformers import DataCollatorForLanguageModeling

    if not isinstance(stream, torch.Tensor) or stream.dim() != 1 or len(stream) < config.held_out_tokens + 4 * (
            config.length - 2):
        raise ValueError(f"stream must be a 1-D tensor of ids longer than held_out_tokens={config.held_out_tokens} "
                         f"plus a few windows, got {tuple(getattr(stream, 'shape', ())) or type(stream).__name__}.")
    train_part, held_part = stream[: -config.held_out_tokens], stream[-config.held_out_tokens:]
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    model = tiny_bert(len(tokenizer), config, seed)  # seeds torch's global RNG: dropout and masking draw from it
    start = model.bert.embeddings.position_embeddings.weight.detach().clone()
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=config.mlm_probability)
    held_starts = torch.arange(0, len(held_part) - config.length + 3, config.length - 2)
    held = _held_out_batch(windows(held_part, held_starts, config.length, cls_id, sep_id), collator, shuffled)
    optimiser, schedule = _optimiser(model, config)
    batches, shuffles = (torch.Generator().manual_seed(seed + offset) for offset in (1000, 2000))
    records = [_record(model, start, held, config, 0)]
    stop = max(config.checkpoints) if stop is None else validation.integer("stop", stop, minimum=0)
    for step in range(1, stop + 1):
        starts = torch.randint(len(train_part) - config.length + 3, (config.batch_size,), generator=batches)
        batch = windows(train_part, starts, config.length, cls_id, sep_id)  # random cut points every step
        if shuffled:
            batch = shuffle_tokens(batch, shuffles)
        masked = collator(list(batch))
        model.train()
        masked_lm_loss(model, masked["input_ids"], masked["labels"]).backward()
        optimiser.step()
        schedule.step()
        optimiser.zero_grad()
        if step in config.checkpoints:
            records.append(_record(model, start, held, config, step))
    return model.eval(), records


def _held_out_batch(rows: torch.Tensor, collator, shuffled: bool) -> dict:
    """The held-out windows masked once with a fixed seed (shuffled too for the control)."""
    state = torch.random.get_rng_state()
    torch.manual_seed(12345)
    if shuffled:
        rows = shuffle_tokens(rows, torch.Generator().manual_seed(12345))
    batch = collator(list(rows))
    torch.random.set_rng_state(state)  # training's random draws stay the same with or without this batch
    return batch


def _record(model, start: torch.Tensor, held: dict, config: PretrainConfig, step: int) -> dict:
    """One checkpoint: the step, the held-out loss (eval mode), table_structure of rows 1..L-2, their movement."""
    model.eval()
    with torch.no_grad():
        loss = float(masked_lm_loss(model, held["input_ids"], held["labels"]))
    table = model.bert.embeddings.position_embeddings.weight.detach()
    inner = slice(1, config.length - 1)  # rows 1..L-2: [CLS] always sits at 0 and [SEP] at L - 1
    moved = torch.linalg.vector_norm((table - start)[inner].double(), dim=1).mean()
    return {"step": step, "held_out_loss": loss, "moved": float(moved),
            "norm": float(torch.linalg.vector_norm(table[inner].double(), dim=1).mean()),
            **table_structure(table[inner])}


@functools.cache
def prepared(length: int = PretrainConfig().length):
    """The corpus's compact tokenizer and its token stream, built once per process ("The text")."""
    from helpers.checkpoint import load_bert

    _, tokenizer = load_bert()
    compact, ids = compact_tokenizer(tokenizer, sklearn_prose())
    return compact, torch.tensor([i for doc in ids for i in doc], dtype=torch.long)


def run(condition: str, seed: int, config: PretrainConfig = PretrainConfig(), stop: int | None = None) -> list[dict]:
    """One condition and seed of the sweep (up to step `stop`): its checkpoint records."""
    if condition not in CONDITIONS:
        raise ValueError(f"condition must be one of {CONDITIONS}, got {condition!r}.")
    tokenizer, stream = prepared(config.length)
    return pretrain(stream, tokenizer, config, seed, shuffled=condition == "shuffled", stop=stop)[1]


def _one_thread_run(cell: tuple) -> list[dict]:
    torch.set_num_threads(1)
    return run(*cell)


def sweep(seeds=tuple(range(6)), config: PretrainConfig = PretrainConfig(), jobs: int = 1) -> dict:
    """Every condition x seed: {"config": ..., "runs": {condition: {seed: records}}}."""
    cells = [(condition, seed, config) for seed in seeds for condition in CONDITIONS]
    if jobs > 1:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            done = pool.map(_one_thread_run, cells, chunksize=1)
    else:
        done = [_one_thread_run(cell) for cell in cells]
    runs = {condition: {} for condition in CONDITIONS}
    for (condition, seed, _), records in zip(cells, done, strict=True):
        runs[condition][str(seed)] = records
    return {"config": asdict(config), "runs": runs}


def load_pretraining_results(path: Path = RESULTS_PATH) -> dict:
    """The stored sweep (regenerate with `make experiments`)."""
    return json.loads(Path(path).read_text())


def main(argv=None) -> None:
    """CLI: run the sweep and write it as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS_PATH)
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--jobs", type=int, default=1, help="processes, one thread each")
    args = parser.parse_args(argv)
    results = sweep(seeds=tuple(range(args.seeds)), jobs=args.jobs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
