"""The runtime: loads a bundle and runs it. Knows only the bundle format, never the compiler."""

from mlcc.runtime.bundle import BundleError, Executable, load
from mlcc.runtime.device import DeviceGuardError, DeviceMisuseError, StreamHazardError

__all__ = ["BundleError", "DeviceGuardError", "DeviceMisuseError", "Executable", "StreamHazardError", "load"]
