"""`make widget`: export the packaged checkpoint to ONNX (never downloaded), store it in the chosen weight format and
gather the browser assets (onnxruntime-web, the JavaScript WordPiece, the tokenizer) into _build/widget/dist.

python -m tools.widget.export [--formats fp32 fp16 int8]: every format asked for is written to _build/widget/ and
measured (size, largest difference from torch on the chapters' sentences); the widget ships FORMAT alone.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import onnx
import torch

from tools.environment import ROOT
from tools.widget.formats import FORMATS, convert
from tools.widget.model import INPUTS, OUTPUTS, WidgetModel, example_inputs

BUILD = ROOT / "_build" / "widget"
DIST = BUILD / "dist"  # what the book vendors into _build/html/_static/widget
NODE_MODULES = ROOT / "tools" / "widget" / "node_modules"
FORMAT = "fp16"  # the shipped format: measured against fp32 and int8 in the closing note of issue 45 (README)
# The browser side: onnxruntime-web's wasm build (its JavaScript bundled in one module) and the WordPiece tokenizer.
ASSETS = {
    "onnxruntime-web/dist/ort.wasm.bundle.min.mjs": "ort.wasm.bundle.min.mjs",
    "onnxruntime-web/dist/ort-wasm-simd-threaded.wasm": "ort-wasm-simd-threaded.wasm",
    "onnxruntime-web/dist/ort-wasm-simd-threaded.mjs": "ort-wasm-simd-threaded.mjs",  # the wasm's loader
    "@huggingface/tokenizers/dist/tokenizers.min.mjs": "tokenizers.min.mjs",
}


def onnx_path(fmt: str) -> Path:
    """Where the export in weight format `fmt` is written."""
    return BUILD / f"bert-{fmt}.onnx"


def export_fp32(bert: torch.nn.Module, path: Path) -> onnx.ModelProto:
    """The checkpoint as an ONNX graph (float32), with a dynamic sequence length; written to `path`."""
    seq = torch.export.Dim("seq", min=2, max=bert.config.max_position_embeddings)
    shapes = {"input_ids": {1: seq}, "token_type_ids": {1: seq}, "position_ids": {1: seq}, "position_scale": None}
    program = torch.onnx.export(WidgetModel(bert), example_inputs(), dynamo=True, input_names=list(INPUTS),
                                output_names=list(OUTPUTS), dynamic_shapes=shapes, optimize=True,
                                external_data=False)
    program.save(str(path), external_data=False)
    return onnx.load(str(path))


def gather_assets(fmt: str, tokenizer_json: Path, measured: dict[str, float], max_positions: int) -> None:
    """Copy the model in `fmt`, the tokenizer and the npm assets into DIST, with a manifest: the names and sizes,
    and the largest differences from torch `measured` on the chapters' sentences (the page states them)."""
    missing = [name for name in ASSETS if not (NODE_MODULES / name).exists()]
    if missing:
        raise SystemExit(f"widget: {missing} not installed: run `npm ci --prefix tools/widget` (make widget does)")
    if DIST.exists():
        shutil.rmtree(DIST)
    DIST.mkdir(parents=True)
    for source, name in ASSETS.items():
        shutil.copyfile(NODE_MODULES / source, DIST / name)
    shutil.copyfile(onnx_path(fmt), DIST / "bert.onnx")
    shutil.copyfile(tokenizer_json, DIST / "tokenizer.json")
    sizes = {path.name: path.stat().st_size for path in sorted(DIST.iterdir())}
    manifest = {"format": fmt, "bytes": sizes, "largest_difference": measured, "max_positions": max_positions}
    (DIST / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


def main() -> None:
    """Export, convert, gather; print each file's size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--formats", nargs="+", choices=FORMATS, default=[FORMAT])
    args = parser.parse_args()
    import onnxruntime

    from helpers.checkpoint import load_bert
    from tools.widget.compare import largest_differences

    bert, tokenizer = load_bert()
    BUILD.mkdir(parents=True, exist_ok=True)
    fp32 = export_fp32(bert, onnx_path("fp32"))
    for fmt in set(args.formats) | {FORMAT}:
        onnx.save(convert(fp32, fmt), str(onnx_path(fmt)))
        print(f"widget: {onnx_path(fmt).relative_to(ROOT)}  {onnx_path(fmt).stat().st_size / 2**20:.1f} MiB")
    session = onnxruntime.InferenceSession(str(onnx_path(FORMAT)), providers=["CPUExecutionProvider"])
    measured = {name: float(f"{value:.1e}") for name, value in largest_differences(session, bert, tokenizer).items()}
    print(f"widget: {FORMAT} vs torch on the chapters' sentences, largest |difference|: {measured}")
    tokenizer_json = BUILD / "tokenizer.json"  # the loaded checkpoint's own tokenizer, whichever it is
    tokenizer.backend_tokenizer.save(str(tokenizer_json))
    gather_assets(FORMAT, tokenizer_json, measured, bert.config.max_position_embeddings)
    total = sum(path.stat().st_size for path in DIST.iterdir())
    print(f"widget: {DIST.relative_to(ROOT)} holds {total / 2**20:.1f} MiB ({FORMAT} weights)")


if __name__ == "__main__":
    main()
