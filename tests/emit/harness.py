"""Run one lowered kernel under Triton's interpreter on numpy inputs (tests use mlcc's own checker)."""

from mlcc.emit.check_numerics import run_kernel

__all__ = ["run_kernel"]
