"""The positive control for order use: a tiny BERT trained on text that only position can predict.

Taught in "Pre-train a tiny BERT" (book/pretrain_positions.ipynb), section "Many seeds and a control".
"""

from __future__ import annotations

from dataclasses import asdict

import torch

from helpers import validation
from helpers.pretraining import (
    SPECIALS,
    PretrainConfig,
    _optimiser,
    held_out_batches,
    masked_lm_loss,
    tiny_bert,
    windows,
)

__all__ = ["aligned_stream", "order_use_of", "train_aligned"]

DEFAULT = PretrainConfig()


def aligned_stream(windows_: int, vocab_size: int, config: PretrainConfig = DEFAULT, seed: int = 0) -> torch.Tensor:
    """Text that only position can predict: one fixed sequence of L - 2 distinct ids, repeated `windows_` times; read
    in windows that start at multiples of L - 2, position i always holds the same token, and every window holds the
    same set of tokens, so without order a [MASK] is only known to be one of the masked ids."""
    windows_ = validation.integer("windows_", windows_, minimum=1)
    width, first = config.length - 2, len(SPECIALS)  # ids after the special tokens
    vocab_size = validation.integer("vocab_size", vocab_size, minimum=first + width)
    generator = torch.Generator().manual_seed(seed)
    fixed = first + torch.randperm(vocab_size - first, generator=generator)[:width]
    return fixed.repeat(windows_)


def order_use_of(model, held_part: torch.Tensor, tokenizer, config: PretrainConfig = DEFAULT) -> float:
    """Order use of a model on held-out text (as the sweep records it): the [MASK]-input loss with each window's
    tokens permuted after masking, minus the loss as written, in nats."""
    held = held_out_batches(held_part, tokenizer, config)
    losses = []
    model.eval()
    with torch.no_grad():
        for key in ("written", "permuted"):
            ids, labels = held[key]["input_ids"], held[key]["labels"]
            labels = torch.where(ids == held["mask_id"], labels, -100)
            losses.append(float(masked_lm_loss(model, ids, labels)))
    return losses[1] - losses[0]


def train_aligned(tokenizer, config: PretrainConfig, steps: int, seed: int = 0):
    """The tiny BERT trained `steps` steps on aligned_stream text with BERT's masking and optimiser: a model that
    reads position, the positive control for order use."""
    from transformers import DataCollatorForLanguageModeling

    steps = validation.integer("steps", steps, minimum=config.warmup + 1)
    config = PretrainConfig(**{**asdict(config), "checkpoints": (0, steps)})  # the schedule decays to 0 at `steps`
    stream = aligned_stream(64, len(tokenizer), config, seed)
    model = tiny_bert(len(tokenizer), config, seed)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=config.mlm_probability)
    optimiser, schedule = _optimiser(model, config)
    draws, width = torch.Generator().manual_seed(seed + 1000), config.length - 2
    model.train()
    for _ in range(steps):
        starts = width * torch.randint(len(stream) // width, (config.batch_size,), generator=draws)
        batch = windows(stream, starts, config.length, tokenizer.cls_token_id, tokenizer.sep_token_id)
        masked = collator(list(batch))
        masked_lm_loss(model, masked["input_ids"], masked["labels"]).backward()
        optimiser.step()
        schedule.step()
        optimiser.zero_grad()
    return model.eval()
