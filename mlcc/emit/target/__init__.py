"""Targets: what each GPU target is (targets.py), AOT compilation for it (aot.py), the parallel cached build
of every kernel for every target (build.py), the tuning database of measured launch configs
(tuning_db.py) and `mlcc tune`, which measures them (tune.py).

The tile heuristics that read a target's figures stay with the lowerings that register them
(mlcc/emit/tiling.py, mlcc/emit/matmul_tiles.py): they are code generation, and a target is data they read.

This __init__ imports nothing, so importing targets.py (the inspector and the report do) pulls in neither
Triton nor the compiler nor the lowerings.
"""
