"""Helpers for the book on BERT's input embeddings; notebooks import from here, not from submodules."""

from helpers.anatomy import *
from helpers.checkpoint import CheckpointError, CheckpointInfo, checkpoint_spec, describe_checkpoint, load_bert
from helpers.families import *
from helpers.gpu import GPU_TAG, cuda_available
from helpers.notebook import setup
from helpers.plots import *
from helpers.positions import *
from helpers.relative_positions import *
from helpers.segments import *
from helpers.sinusoids import *
from helpers.tokens import *
