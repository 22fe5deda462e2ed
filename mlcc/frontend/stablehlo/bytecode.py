"""MLIR bytecode (``jax.export`` portable artifacts) -> text, through jaxlib's MLIR bindings.

Only this module touches jax, and only when given bytecode: text input never
needs it. A portable artifact holds VHLO, StableHLO's versioned form, which
jaxlib turns back into StableHLO before printing.
"""

from __future__ import annotations

from mlcc.frontend.stablehlo.errors import StableHLOParseError, StableHLOUnsupportedError

BYTECODE_MAGIC = b"ML\xefR"
INSTALL_HINT = "portable artifact: install the jax extra (pip install 'mlcc[jax]')"


def bytecode_to_text(data: bytes, filename: str) -> str:
    try:
        from jax._src.interpreters import mlir as jax_mlir
        from jax._src.lib import _jax
        from jaxlib.mlir import ir
    except ImportError:
        raise StableHLOUnsupportedError(INSTALL_HINT, file=filename) from None
    with jax_mlir.make_ir_context():
        try:
            module = _jax.mlir.deserialize_portable_artifact(data)
        except Exception:  # not VHLO: plain StableHLO bytecode
            try:
                module = ir.Module.parse(data)
            except Exception as e:
                message = " ".join(str(e).split())
                raise StableHLOParseError(f"cannot read MLIR bytecode: {message}", file=filename) from None
        return jax_mlir.module_to_string(module)
