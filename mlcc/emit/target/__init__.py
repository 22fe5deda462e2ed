"""Targets: what each GPU target is (targets.py), AOT compilation for it (aot.py), the parallel cached build
of every kernel for every target (build.py), the tuning database of measured launch configs
(tuning_db.py) and `mlcc tune`, which measures them (tune.py).

The tile heuristics that read a target's figures stay with the lowerings that register them
(mlcc/emit/tiling.py, mlcc/emit/matmul_tiles.py): they are code generation, and a target is data they read.
"""

from mlcc.emit.target.targets import DeviceModel, Target, TargetError, device_model, parse_target, parse_targets

__all__ = ["DeviceModel", "Target", "TargetError", "device_model", "parse_target", "parse_targets"]
