"""Errors users see, each with its documented exit code (README, "Exit codes").

The classes live in mlcc/bundle/errors.py, where the runtime (which imports nothing from the compiler)
raises them too; this is the compiler's name for the same classes, so ``except mlcc.errors.X`` catches
an error from either side.
"""

from mlcc.bundle.errors import (EXIT_CANT_CREATE, EXIT_INPUT_MISSING, EXIT_INTERNAL, EXIT_INVALID_INPUT, EXIT_MISMATCH,
                                EXIT_OK, EXIT_UNSUPPORTED, EXIT_USAGE, BundleError, InputMissingError, InternalError,
                                InvalidInputError, MismatchError, MlccError, OutputError, UnsupportedError, UsageError)

__all__ = ["EXIT_CANT_CREATE", "EXIT_INPUT_MISSING", "EXIT_INTERNAL", "EXIT_INVALID_INPUT", "EXIT_MISMATCH", "EXIT_OK",
           "EXIT_UNSUPPORTED", "EXIT_USAGE", "BundleError", "InputMissingError", "InternalError", "InvalidInputError",
           "MismatchError", "MlccError", "OutputError", "UnsupportedError", "UsageError"]
