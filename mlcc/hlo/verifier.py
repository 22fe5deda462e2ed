"""The IR verifier: SSA, operand counts, attributes, shapes, dtypes, layouts.

Run after every pass that changed the module. Returns nothing; raises
VerifierError listing every problem found. The level rises with the module's
properties (what the phases run so far guarantee, mlcc/pipeline.py): fusion
bodies' layouts once layouts are assigned, fusion structure once fused, the
schedule once scheduled, the buffer plan once buffers are assigned.
"""

from __future__ import annotations

from mlcc.hlo.ir import DTYPE_BITS, Computation, Instruction, Module, Property, Shape, is_storage
from mlcc.hlo.opcodes import FUSION_KINDS, OPCODES, VARIADIC, ops_with
from mlcc.hlo.shape_inference import FP8_DOT, ShapeError, infer_shape


class VerifierError(ValueError):
    pass


def _check_layout(shape, where: str, errors: list[str]) -> None:
    if shape.is_tuple:
        for e in shape.elements:
            _check_layout(e, where, errors)
        return
    if sorted(shape.layout) != list(range(shape.rank)):
        errors.append(f"{where}: layout {{{','.join(map(str, shape.layout))}}} is not a permutation of rank {shape.rank}")
    for d in shape.dims:
        if isinstance(d, int) and d < 0:
            errors.append(f"{where}: negative dim {d}")


def _same_logical(a, b) -> bool:
    if a.is_tuple or b.is_tuple:
        return a.is_tuple and b.is_tuple and len(a.elements) == len(b.elements) and all(
            _same_logical(x, y) for x, y in zip(a.elements, b.elements))
    return a.dtype == b.dtype and tuple(a.dims) == tuple(b.dims)


# The ops that take the quantized storage types (fp8, fp4, 4- and 2-bit ints): they convert, reinterpret, move
# or hold values; arithmetic on them happens after a convert to a wide type.
STORAGE_OPS = (ops_with("data_movement") | ops_with("structural") | ops_with("no_kernel")
               | {"convert", "bitcast-convert", "select"})


def _storage_dtypes(shape) -> list[str]:
    if shape.is_tuple:
        return [d for e in shape.elements for d in _storage_dtypes(e)]
    return [shape.dtype] if is_storage(shape.dtype) else []


def storage_misuse(inst: Instruction) -> str | None:
    """The storage type (fp8, fp4, 4- or 2-bit int) inst computes on although it is not a storage op, or None.
    The ONNX importer checks it too: a model that applies such an op to such a type breaks the op's type
    constraints (bad input), where after a pass it is a bug."""
    if inst.opcode in STORAGE_OPS:
        return None
    if inst.opcode in ("dot", "convolution") and inst.shape.dtype == "f32" and all(
            o.shape.dtype in FP8_DOT for o in inst.operands):
        return None  # an fp8 contraction: the tensor cores multiply fp8 values (mlcc/hlo/passes/quantized_fp8.py)
    found = _storage_dtypes(inst.shape) + [d for o in inst.operands for d in _storage_dtypes(o.shape)]
    return found[0] if found else None


def _check_storage(inst: Instruction, where: str, errors: list[str]) -> None:
    if inst.opcode == "bitcast-convert" and not inst.shape.is_tuple and inst.operands:
        src, dst = inst.operands[0].shape.dtype, inst.shape.dtype
        if (is_storage(src) or is_storage(dst)) and DTYPE_BITS[src] != DTYPE_BITS[dst]:
            errors.append(f"{where}: reinterprets {DTYPE_BITS[src]}-bit {src} as {DTYPE_BITS[dst]}-bit {dst}")
    found = storage_misuse(inst)
    if found:
        errors.append(f"{where}: takes {found}, a storage type (convert it to a wide type first)")


def verify_instruction(inst: Instruction, errors: list[str]) -> None:
    where = f"%{inst.name} ({inst.opcode})"
    info = OPCODES.get(inst.opcode)
    if info is None:
        errors.append(f"{where}: unknown opcode")
        return
    n = len(inst.operands)
    if info.arity == VARIADIC:
        if n < info.min_arity:
            errors.append(f"{where}: needs at least {info.min_arity} operands, has {n}")
            return
    elif n != info.arity:
        errors.append(f"{where}: needs {info.arity} operands, has {n}")
        return
    for a in info.attrs:
        if a not in inst.attrs and not (a == "calls" and inst.called is not None):
            errors.append(f"{where}: missing attribute '{a}'")
            return
    known = set(info.attrs) | set(info.optional)
    for a in inst.attrs:
        if a not in known:
            errors.append(f"{where}: unexpected attribute '{a}'")
    _check_layout(inst.shape, where, errors)
    _check_storage(inst, where, errors)
    if inst.opcode == "fusion":
        if inst.called is None:
            errors.append(f"{where}: fusion without a called computation")
            return
        if inst.attrs["kind"] not in FUSION_KINDS:
            errors.append(f"{where}: unknown fusion kind '{inst.attrs['kind']}'")
        params = inst.called.parameters()
        if len(params) != n:
            errors.append(f"{where}: {n} operands for {len(params)} fused parameters")
        for p, op in zip(params, inst.operands):
            if not _same_logical(p.shape, op.shape):
                errors.append(f"{where}: operand %{op.name} {op.shape} does not match fused parameter %{p.name} {p.shape}")
        root = inst.called.root
        if root is not None and not _same_logical(root.shape, inst.shape):
            errors.append(f"{where}: shape {inst.shape} differs from fused root {root.shape}")
        elif root is not None and inst.shape.is_tuple and (root.opcode != "tuple" or any(
                o.shape.is_tuple or o.opcode == "parameter" for o in root.operands)):
            errors.append(f"{where}: a multi-output fusion's root must be a tuple of computed arrays, not "
                          f"{root.opcode} %{root.name}")
        return
    try:
        expected = infer_shape(inst.opcode, [o.shape for o in inst.operands], inst.attrs, inst.shape)
    except ShapeError as e:
        errors.append(f"{where}: {e}")
        return
    except (KeyError, TypeError, IndexError) as e:
        errors.append(f"{where}: malformed attributes ({type(e).__name__}: {e})")
        return
    if not _same_logical(expected, inst.shape):
        errors.append(f"{where}: shape is {inst.shape}, expected {expected}")
    if inst.opcode == "bitcast" and isinstance(inst.shape, Shape):
        src = inst.operands[0].shape
        if src.is_static and inst.shape.is_static and src.nbytes() != inst.shape.nbytes():
            errors.append(f"{where}: bitcast changes the byte size")


def verify_computation(comp: Computation, errors: list[str]) -> None:
    defined: set[int] = set()
    names: set[str] = set()
    param_indices: set[int] = set()
    for inst in comp.instructions:
        if inst.name in names:
            errors.append(f"%{inst.name}: defined twice in %{comp.name}")
        names.add(inst.name)
        if inst.parent is not comp:
            errors.append(f"%{inst.name}: parent is not %{comp.name}")
        for op in inst.operands:
            if id(op) not in defined:
                errors.append(f"%{inst.name}: operand %{op.name} is not defined before use in %{comp.name}")
            if inst not in op.users:
                errors.append(f"%{inst.name}: missing from the users of %{op.name}")
        for u in inst.users:
            if inst not in u.operands:
                errors.append(f"%{inst.name}: stale user %{u.name}")
        if inst.opcode == "parameter":
            idx = inst.attrs.get("index")
            if idx in param_indices:
                errors.append(f"%{inst.name}: parameter index {idx} used twice")
            param_indices.add(idx)
        defined.add(id(inst))
        verify_instruction(inst, errors)
    if sorted(param_indices) != list(range(len(param_indices))):
        errors.append(f"%{comp.name}: parameter indices {sorted(param_indices)} are not 0..n-1")
    if comp.root is None:
        errors.append(f"%{comp.name}: no root")
    elif id(comp.root) not in defined:
        errors.append(f"%{comp.name}: root %{comp.root.name} is not in the computation")


def verify_module(module: Module) -> None:
    errors: list[str] = []
    names: set[str] = set()
    for comp in module.computations:
        if comp.name in names:
            errors.append(f"computation %{comp.name} defined twice")
        names.add(comp.name)
        verify_computation(comp, errors)
    entry = [c for c in module.computations if c.is_entry]
    if len(entry) != 1:
        errors.append(f"module has {len(entry)} entry computations")
    elif module.output_names:
        root = entry[0].root
        n = len(root.shape.elements) if root is not None and root.shape.is_tuple else 1
        if n != len(module.output_names):
            errors.append(f"entry returns {n} values for {len(module.output_names)} output names")
        pnames = [n for n in (p.attrs.get("name") for p in entry[0].parameters()) if n is not None]
        if len(set(pnames)) != len(pnames):
            errors.append("entry parameter names are not unique")
    if len(entry) == 1:
        _verify_properties(module, entry[0], errors)
    for inst in module.all_instructions():
        if inst.opcode == "constant" and "ref" in inst.attrs and module.constants and inst.attrs["ref"] not in module.constants:
            errors.append(f"%{inst.name}: constant ref '{inst.attrs['ref']}' has no data")
    if errors:
        raise VerifierError("; ".join(errors))


def _verify_properties(module: Module, entry: Computation, errors: list[str]) -> None:
    """The checks a module's properties call for, beyond the structural ones every module gets."""
    props = module.properties
    fusions = [i for i in entry.instructions if i.opcode == "fusion" and i.called is not None]
    if Property.LAYOUTS_ASSIGNED in props:  # a fusion's body reads and writes its operands' buffers as laid out
        for f in fusions:
            for p, op in zip(f.called.parameters(), f.operands):
                if not p.shape.is_tuple and p.shape.layout != op.shape.layout:
                    errors.append(f"%{f.name}: fused parameter %{p.name} layout {p.shape} differs from operand "
                                  f"%{op.name} {op.shape}")
            root = f.called.root
            if root is not None and not root.shape.is_tuple and root.shape.layout != f.shape.layout:
                errors.append(f"%{f.name}: fused root {root.shape} differs from the fusion's layout {f.shape}")
    if Property.FUSED in props:  # a multi-output fusion's results are read out by get-tuple-element
        for f in fusions:
            for u in f.users if f.shape.is_tuple else ():
                if u.opcode != "get-tuple-element":
                    errors.append(f"%{u.name}: reads multi-output fusion %{f.name} whole, not by get-tuple-element")
    if Property.FUSED in props:  # every called computation is one fusion's body, and bodies do not nest
        callers: dict[str, int] = {}
        for inst in module.all_instructions():
            if inst.called is not None:
                callers[inst.called.name] = callers.get(inst.called.name, 0) + 1
                if inst.parent is not entry:
                    errors.append(f"%{inst.name}: a call inside fusion body %{inst.parent.name}")
        for comp in module.computations:
            if not comp.is_entry and callers.get(comp.name, 0) != 1:
                errors.append(f"%{comp.name}: fusion body called {callers.get(comp.name, 0)} times, not once")
    if Property.SCHEDULED in props and entry.root is not None and entry.instructions[-1:] != [entry.root]:
        errors.append(f"%{entry.name}: scheduled, but the root %{entry.root.name} is not the last step")
    if Property.BUFFERS_ASSIGNED in props:
        plan = module.buffer_plan
        if plan is None:
            errors.append("buffers assigned, but the module has no buffer plan")
        else:
            for inst in entry.instructions:
                if not inst.shape.is_tuple and inst.name not in plan.value_buffer:
                    errors.append(f"%{inst.name}: no buffer in the buffer plan")
