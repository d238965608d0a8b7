"""The widget's JavaScript WordPiece (@huggingface/tokenizers, run by node on the tokenizer.json `make widget` ships)
against the book's Python tokenizer: the same word pieces, ids and token types on the chapters' sentences and on
words that take WordPiece's harder paths (continuations, accents, CJK, unknown characters, special tokens)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from helpers.checkpoint import load_bert
from tools.widget.compare import CHAPTER_TEXTS
from tools.widget.export import DIST

IN_CI = os.environ.get("CI", "").lower() == "true"
HARDER = [("unaffable embeddings transformers", ""), ("x☃y", ""), ("Café naïve résumé", ""), ("北京 is a city", ""),
          ("[CLS] inside [SEP] the text [MASK]", ""), ("a" * 120, ""), ("Don't!!! (really?)", "Yes—really.")]
SCRIPT = """
const { Tokenizer } = await import(process.argv[1]);
const fs = await import("fs");
const tokenizer = new Tokenizer(JSON.parse(fs.readFileSync(process.argv[2])), {});
const texts = JSON.parse(fs.readFileSync(0));
const out = texts.map(([a, b]) => tokenizer.encode(a, { text_pair: b || null, return_token_type_ids: true }));
console.log(JSON.stringify(out.map(e => [e.tokens, e.ids, e.token_type_ids])));
"""


def test_javascript_wordpiece_matches_python():
    node = shutil.which("node")
    module = DIST / "tokenizers.min.mjs"
    if not (node and module.exists()):
        reason = "node or the widget's assets are missing: run `make widget` (make test does)"
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    texts = CHAPTER_TEXTS + HARDER
    done = subprocess.run([node, "--input-type=module", "-e", SCRIPT, str(module), str(DIST / "tokenizer.json")],
                          input=json.dumps(texts), capture_output=True, text=True, check=True, timeout=60)
    _, tokenizer = load_bert()
    for (a, b), (tokens, ids, types) in zip(texts, json.loads(done.stdout), strict=True):
        expected = tokenizer(a, b or None)
        assert ids == expected["input_ids"], (a, b)
        assert tokens == tokenizer.convert_ids_to_tokens(expected["input_ids"]), (a, b)
        assert types == expected["token_type_ids"], (a, b)
