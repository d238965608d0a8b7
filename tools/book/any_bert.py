"""`python -m tools.book.any_bert`: build the whole book on two BERTs made on the fly; `make test-any-bert`.

The book promises to build for any BERT. This makes three checkpoints nobody trained, a random BERT of width 96,
the same with a position table of 128 rows instead of 512, and one with the packaged checkpoint's shapes but fresh
weights, builds the book with each into its own folder (its own execution cache; the builds side by side), and
checks that every page built, that no cell failed, and that the findings page gives a verdict for every finding.
It prints how many findings hold.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tools.book.findings_page import VERDICTS, stored_findings
from tools.book.toc import ROOT, toc_notebooks, toc_pages

OUT = ROOT / "_build" / "any-bert"
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
WIDTH_96 = dict(hidden_size=96, num_hidden_layers=2, num_attention_heads=4, intermediate_size=192)
KINDS = {"width-96": WIDTH_96, "width-96-table-128": {**WIDTH_96, "max_position_embeddings": 128},
         "fresh-packaged-shapes": {}}


def make_checkpoint(kind: str, directory: Path) -> Path:
    """Save an untrained BertModel (a kind of KINDS) with the packaged tokenizer files."""
    import torch
    import transformers
    from transformers import BertConfig, BertModel

    from helpers.checkpoint import packaged_dir

    packaged = packaged_dir()
    if kind not in KINDS:
        raise ValueError(f"kind is one of {', '.join(map(repr, KINDS))}, got {kind!r}")
    config = BertConfig(**{**BertConfig.from_pretrained(packaged).to_dict(), **KINDS[kind]})
    torch.manual_seed(0)
    transformers.utils.logging.disable_progress_bar()
    BertModel(config).save_pretrained(directory)
    for name in TOKENIZER_FILES:
        shutil.copy(packaged / name, directory / name)
    return directory


def start_build(kind: str) -> tuple[subprocess.Popen, Path]:
    """Start `jupyter-book build` on a fresh checkpoint of this kind, into _build/any-bert/<kind>/."""
    folder = OUT / kind
    shutil.rmtree(folder, ignore_errors=True)
    checkpoint = make_checkpoint(kind, folder / "checkpoint")
    env = {**os.environ, "BERT_BOOK_CHECKPOINT": str(checkpoint)}
    log = open(folder / "build.log", "w")  # the process writes to it until it ends
    command = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(ROOT), "--path-output",
               str(folder / "book"), "--warningiserror", "--keep-going"]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), folder


def verdict_counts(findings_html: str) -> dict[str, int]:
    """How many findings the built page says hold / do not hold for this checkpoint (packaged column excluded)."""
    cells = re.findall(r"<td[^>]*>(.*?)</td>", findings_html, re.S)
    verdicts = [re.sub(r"<[^>]+>", "", cell).strip() for cell in cells[2::4]]  # column 3: this checkpoint's verdict
    return {verdict: verdicts.count(verdict) for verdict in VERDICTS} | {"rows": len(verdicts)}


def problems_with(folder: Path, returncode: int, expected_findings: int) -> list[str]:
    """What is wrong with one build: a failed command, a missing page, findings without a verdict."""
    html = folder / "book" / "_build" / "html"
    problems = [f"jupyter-book exited {returncode}: see {folder / 'build.log'}"] if returncode else []
    problems += [f"page {page}.html missing" for page in toc_pages() if not (html / f"{page}.html").exists()]
    if (html / "book" / "findings.html").exists():
        counts = verdict_counts((html / "book" / "findings.html").read_text())
        if counts["rows"] != expected_findings or counts["holds"] + counts["does not hold"] != expected_findings:
            problems.append(f"findings page: {counts}, expected a verdict for each of {expected_findings}")
    return problems


def run_notebook(path: Path, kind: str) -> list[str]:
    """Execute one chapter on a fresh checkpoint of this kind (cells tagged `gpu` skipped without CUDA); its errors."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from tools.testing.gpu import configure_nbclient

    checkpoint = make_checkpoint(kind, OUT / kind / "checkpoint")
    os.environ["BERT_BOOK_CHECKPOINT"] = str(checkpoint)  # the kernel inherits it
    configure_nbclient()
    notebook = nbformat.read(path, as_version=4)
    try:
        NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": path.parent}}
                       ).execute()
    except CellExecutionError as error:  # its text holds the failing cell's source, then the traceback
        return [re.sub(r"\x1b\[[0-9;]*m", "", str(error)).strip()[:2000]]
    return []


def main() -> int:
    """Build the book on both checkpoints; print each build's time and verdicts; exit 1 on any problem.

    `python -m tools.book.any_bert book/<chapter>.ipynb [kind ...]` runs one chapter instead (kinds: KINDS).
    """
    if len(sys.argv) > 1:
        kinds = sys.argv[2:] or list(KINDS)
        errors = {kind: run_notebook(Path(sys.argv[1]).resolve(), kind) for kind in kinds}
        for kind, problems in errors.items():
            print(f"any_bert: {sys.argv[1]} on {kind}: {problems[0] if problems else 'ran without an error'}\n")
        return 1 if any(errors.values()) else 0
    expected = sum(len(stored_findings(path)) for path in toc_notebooks() if path.stem != "findings")
    start = time.monotonic()
    builds = {kind: start_build(kind) for kind in KINDS}
    failed = False
    for kind, (process, folder) in builds.items():
        problems = problems_with(folder, process.wait(), expected)
        page = folder / "book" / "_build" / "html" / "book" / "findings.html"
        counts = verdict_counts(page.read_text()) if page.exists() else {}
        print(f"any_bert: {kind}: {time.monotonic() - start:.0f} s, findings {counts}")
        for problem in problems:
            print(f"any_bert: {kind}: {problem}")
        failed |= bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
