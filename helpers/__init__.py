"""What the chapters of "BERT's First Vectors" import: one module per concept, named after the chapter that teaches it.

    checkpoint          load_bert(): the checkpoint the book runs on, hash-checked (every chapter)
    anatomy             the layer taken apart: checked inputs, three lookups, their sum (the layer at a glance)
    tokens              WordPiece, token tables, nearest tokens (token embeddings)
    segments            segment rows and swaps (segment embeddings)
    positions           learned-position analyses and probes (learned positions)
    layernorm           LayerNorm by hand, dropout, precision (the sum and LayerNorm)
    sinusoids           sinusoidal tables, rotations, rotary scores (sinusoidal encodings)
    relative_positions  T5's relative-position buckets (sinusoidal encodings)
    families            the relatives, read from transformers' own classes (one layer, many families)
    plots, tables       the house style and the figure and table primitives the chapters share
    notebook            setup(): seeds, print options, plot style
"""

from helpers.anatomy import *  # noqa: F403
from helpers.checkpoint import *  # noqa: F403
from helpers.families import *  # noqa: F403
from helpers.notebook import *  # noqa: F403
from helpers.plots import *  # noqa: F403
from helpers.positions import *  # noqa: F403
from helpers.relative_positions import *  # noqa: F403
from helpers.segments import *  # noqa: F403
from helpers.sinusoids import *  # noqa: F403
from helpers.tables import *  # noqa: F403
from helpers.tokens import *  # noqa: F403
