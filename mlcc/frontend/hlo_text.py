"""The IR's own text as a compiler input: a bundle's model.hlo, a --dump-ir file, a test case.

The text holds everything but the weights: a constant with a ``ref`` names data
that a bundle keeps in weights.bin, found through the manifest.json beside the
text (by the constant's buffer, its instruction's name, in its layout's byte
order). The header tells how far the pipeline got (``is_scheduled=true``, or
``properties={...}``); the compiler runs only the phases still to do.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mlcc.errors import InvalidInputError
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import Instruction, Module, TupleShape
from mlcc.hlo.parser import ParseError, parse_module
from mlcc.hlo.verifier import VerifierError, verify_module

SUFFIXES = (".hlo",)


def is_hlo_text(path: Path, head: bytes) -> bool:
    """Whether a file is the IR's text: by its suffix, or by its first word."""
    return path.suffix in SUFFIXES or head.lstrip().startswith(b"HloModule")


def import_hlo_text(path: Path, require_weights: bool = True) -> Module:
    """Parse and verify the module in path, its weights read from the bundle beside it (when it has some).
    Without require_weights, constants whose data is not beside the text stay without data (mlcc opt: the
    passes leave such constants alone)."""
    try:
        module = parse_module(path.read_text())
    except (ParseError, UnicodeDecodeError) as e:
        raise InvalidInputError(f"not valid IR text: {e}", file=str(path)) from None
    _name_outputs(module, path)
    refs = {i.name: i for i in module.entry.instructions if i.opcode == "constant" and "ref" in i.attrs}
    if refs and (require_weights or (path.parent / "manifest.json").exists()):
        _load_weights(module, refs, path.parent)
    try:
        verify_module(module)
    except VerifierError as e:
        raise InvalidInputError(f"invalid IR: {e}", file=str(path)) from None
    return module


def _name_outputs(module: Module, path: Path) -> None:
    """A module written by hand (no ``output_names`` in its header) returns what its ROOT holds, as XLA reads
    it: a tuple's elements, or the root value itself, each named by its instruction. The compiler's own
    modules end in a tuple of the named outputs, so a bare root is wrapped in one (only before any phase
    ran: a module past them must say its outputs)."""
    entry = module.entry
    root = entry.root
    if module.output_names or root is None:
        return
    values = list(root.operands) if root.shape.is_tuple else [root]
    if not root.shape.is_tuple:
        if module.properties:
            raise InvalidInputError(f"the entry's ROOT %{root.name} is not a tuple and the header names no "
                                    f"output_names: a module past layout assignment must end in a tuple of its "
                                    f"outputs, named by output_names={{...}}", file=str(path))
        wrap = Instruction(entry.unique_name("tuple"), "tuple", TupleShape((root.shape,)), [root])
        entry.add(wrap)
        entry.root = wrap
    names = [v.attrs.get("name") if v.opcode == "parameter" and v.attrs.get("name") else v.name for v in values]
    if len(set(names)) != len(names):
        names = [f"{n}.{i}" for i, n in enumerate(names)]  # the same value returned twice
    module.output_names = names


def _load_weights(module: Module, refs: dict, folder: Path) -> None:
    manifest_path = folder / "manifest.json"
    try:
        weights = json.loads(manifest_path.read_text())["weights"]
    except (OSError, ValueError, KeyError):
        raise InvalidInputError(f"constants refer to weights ({', '.join(sorted(i.attrs['ref'] for i in refs.values()))}"
                                f"), but there is no bundle manifest.json with a weights table beside the text",
                                file=str(manifest_path)) from None
    data_path = folder / weights["file"]
    tensors = {t["name"]: t for t in weights["tensors"]}
    for name, inst in refs.items():
        t = tensors.get(name)
        if t is None:
            raise InvalidInputError(f"constant %{name} (ref {inst.attrs['ref']}) is not in the bundle's weights",
                                    file=str(manifest_path))
        dims = [int(d) for d in inst.shape.dims]
        flat = np.fromfile(data_path, dtype=numpy_dtype(inst.shape.dtype), count=int(np.prod(dims, dtype=np.int64)),
                           offset=int(t["offset"]))
        module.constants[inst.attrs["ref"]] = _logical(flat, dims, list(inst.shape.layout))
    module.source_files = [manifest_path, data_path]


def _logical(flat: np.ndarray, dims: list[int], layout: list[int]) -> np.ndarray:
    """The array of shape dims whose bytes, in layout's (minor-to-major) order, are flat."""
    if not dims:
        return flat.reshape(())
    major_to_minor = list(reversed(layout))
    return np.transpose(flat.reshape([dims[d] for d in major_to_minor]), np.argsort(major_to_minor))
