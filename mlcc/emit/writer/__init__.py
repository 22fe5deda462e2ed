"""The bundle writer: the compiled module, its kernels, binaries and buffer plan, written as the bundle
format that mlcc/bundle defines (manifest.json, intent.json, kernels/, weights.bin, model.hlo)."""

from mlcc.emit.writer.bundle import write_bundle
from mlcc.emit.writer.intent import build_intent

__all__ = ["build_intent", "write_bundle"]
