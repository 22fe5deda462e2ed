"""The runtime: loads a bundle and runs it. Knows only the bundle format, never the compiler."""

from mlcc.runtime.bundle import BundleError, Executable, load

__all__ = ["BundleError", "Executable", "load"]
