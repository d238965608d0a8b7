"""What the chapters of "BERT's First Vectors" import: one module per concept, named after the chapter that teaches it.

    checkpoint          load_bert(): the checkpoint the book runs on, hash-checked (every chapter)
    anatomy             the layer taken apart: checked inputs, three lookups, their sum (the layer at a glance)
    tokens              WordPiece, token tables, nearest tokens (token embeddings)
    token_figures       the token chapter's figures
    segments            segment rows and swaps (segment embeddings)
    positions           learned-position analyses and probes (learned positions)
    position_figures    the learned-position chapter's figures
    position_rows       one position row against its table; a one-column read-out (learned positions)
    layernorm           LayerNorm by hand, dropout, shares of the sum, precision, their figures (the sum and LayerNorm)
    sinusoids           sinusoidal tables, rotations, rotary scores, their figures (sinusoidal encodings; families)
    relative_positions  T5's relative-position buckets and ALiBi's slopes, their figures (relative positions: T5)
    families            the relatives, built from transformers' own classes; tables, figures (one layer, many families)
    input_layers        any model's input layer read from its modules and hooks (one layer, many families)
    scratch             BERT's embedding layer built from torch.nn parts (build it yourself; train it)
    long_inputs         texts longer than the position table: windows, copied or interpolated rows (build it yourself)
    position_schemes    seven position schemes as one switch in a tiny transformer: RoPE, ALiBi, T5 bias (train it)
    training            order tasks, the training loop, the seed sweep and its figures (train it)
    findings            a claim about trained weights, stated for the checkpoint that ran (every chapter)
    plots               the house style and the figure primitives more than one chapter draws
    tables              the one table type: HTML or Markdown in the book, plain text for nbval
    notebook            setup(): seeds, print options, plot style
    validation          the argument checks every helper shares: integers, sizes, ids, families (when things go wrong)

Every module lists its public names in __all__; `from helpers import name` finds each of them here.
"""

from helpers.anatomy import *  # noqa: F403
from helpers.checkpoint import *  # noqa: F403
from helpers.families import *  # noqa: F403
from helpers.findings import *  # noqa: F403
from helpers.input_layers import *  # noqa: F403
from helpers.layernorm import *  # noqa: F403
from helpers.long_inputs import *  # noqa: F403
from helpers.notebook import *  # noqa: F403
from helpers.plots import *  # noqa: F403
from helpers.position_figures import *  # noqa: F403
from helpers.position_rows import *  # noqa: F403
from helpers.position_schemes import *  # noqa: F403
from helpers.positions import *  # noqa: F403
from helpers.relative_positions import *  # noqa: F403
from helpers.scratch import *  # noqa: F403
from helpers.segments import *  # noqa: F403
from helpers.sinusoids import *  # noqa: F403
from helpers.tables import *  # noqa: F403
from helpers.token_figures import *  # noqa: F403
from helpers.tokens import *  # noqa: F403
from helpers.training import *  # noqa: F403
from helpers.validation import *  # noqa: F403
