"""QKV-projection attention fusion: an encoder's merged QKV GEMM computed inside its attention kernel.

Fusion (mlcc/hlo/passes/fusion.py) leaves a self-attention layer as two kernels: the merged QKV projection
(a dot of the layer's input X [..., S, K] with the merged weights W [K, 3 * H * D], plus its bias in an
output fusion's epilogue) stores [..., S, 3 * H * D], and the attention fusion reads q, k and v as strided
views (slice, reshape, transpose) of that buffer. This pass runs after Fusion and B2bFusion and moves the
projection into the attention fusion when the attention is its only reader::

    %dot.3 = f32[1,16,192]{2,1,0} dot(%x, %w), ...
    %fusion.attention.1 = f32[1,4,16,16]{3,1,2,0} fusion(%dot.3, %mask), kind=attention
 -> %fusion.attention.1 = f32[1,4,16,16]{3,1,2,0} fusion(%x, %w, %mask), kind=attention

The attention kernel (mlcc/emit/codegen/attention.py) then computes each program's q tile as
X[its query rows] @ W[:, q's columns of its head] (+ bias), and each key block's k and v tiles the same way
in its key loop: the [S, 3 * H * D] projection never reaches memory.

Recompute: a program owns one (batch..., head) and one block of queries, and computes the k and v tiles of
every key for its head. Heads take disjoint columns of W and key blocks disjoint rows, so with the whole
sequence in one query block each product is computed once, as the GEMM did. With several query blocks
every block's program would compute the head's whole K and V projection again: (blocks - 1) * 4 * S * K * D
FLOPs per (batch, head) on top of the GEMM's, and X and W read once per block, which the traffic model
(mlcc/hlo/traffic.py counts each kernel operand once) would not show. So the pass takes only sequences that
fit one query block (S <= MAX_QKV_SEQ; the kernel's BLOCK_M is then the whole sequence) and says why it
refuses a longer one with ``--explain-fusion``: there the stored projection is the cheaper cut.

Taken only for encoder self-attention: not causal, no sliding window, soft-capping or fake-quantized scores,
no KV cache stored, q/k/v not computed in the kernel already (rotary), float weights and static shapes.

An int8 encoder (QDQ or QOperator, mlcc/hlo/passes/quantized_dot.py and recognize/quant_attention.py) is taken
too: there the projection is a u8 x s8 -> s32 dot, and the fake-quantized attention computes q, k and v from
slices of its s32 result (the per-channel dequantization, bias, requantization to u8 and the DequantizeLinear
each Q/DQ pair says: elementwise ops, with the head split's bitcasts between them). Elementwise ops keep
coordinates, so each of q, k and v is still a strided view of the projection once they are skipped
(int8_views); the kernel computes the s32 tile at the view's rows and columns on the integer tensor cores and
applies those ops to it as it did to the loaded tile. The fake-quantized scores and probabilities are the
attention's own and stay as they are.
"""

from __future__ import annotations

from mlcc.hlo.ir import Computation, Instruction, Module
from mlcc.hlo.opcodes import ELEMENTWISE_OPS, ops_with
from mlcc.hlo.passes.fusion import MAX_PARAMETERS, _unique_comp_name
from mlcc.hlo.passes.pass_manager import Pass
from mlcc.hlo.views import View, affine_view, view_of_steps

MAX_QKV_SEQ = 64  # the longest sequence one query block holds (f32 q, score and output tiles in registers)
FLOATS = ("f32", "f16", "bf16")
INT8 = ("s8", "u8")
VIEW_OPS = ops_with("strided_view")
_NOT_ENCODER = ("window", "softcap", "score_quant", "prob_quant")
_NOT_ENCODER_INT8 = ("window", "softcap", "quant_type")  # (fake-quantized int8 scores are the int8 attention's)


def projection_of(fusion: Instruction) -> tuple[Instruction, Instruction, Instruction | None] | None:
    """(dot, the dot's output value in the fusion, the bias parameter or None) when a fusion (a bare dot
    counts as one) computes a plain projection: a dot of two parameters, alone or plus a broadcast rank-1
    bias along its last dim (the QKV producer this pass moves into an attention fusion)."""
    if fusion.opcode == "dot":
        return fusion, fusion, None
    if fusion.opcode != "fusion" or fusion.attrs.get("kind") != "output" or fusion.shape.is_tuple:
        return None
    root = fusion.called.root
    return plain_projection(root)


def plain_projection(root: Instruction) -> tuple[Instruction, Instruction, Instruction | None] | None:
    """(dot, root, bias parameter or None) when root is a dot of two parameters, or that plus a broadcast
    rank-1 bias parameter along the last dim: in a producer's body, or in the merged attention body (where
    the attention kernel finds the projection it computes)."""
    def params(dot: Instruction) -> bool:
        return all(o.opcode == "parameter" for o in dot.operands)

    if root.opcode == "dot":
        return (root, root, None) if params(root) else None
    if root.opcode != "add":
        return None
    for dot, bias in (root.operands, reversed(root.operands)):
        if dot.opcode == "dot" and params(dot) and bias.opcode == "broadcast" and \
                bias.operands[0].opcode == "parameter" and bias.operands[0].shape.rank == 1 and \
                tuple(bias.attrs["dimensions"]) == (root.shape.rank - 1,):
            return dot, root, bias.operands[0]
    return None


def qkv_views(attention: Instruction, stop: frozenset[int] = frozenset()) -> list:
    """affine_view of q, k and v inside a fusion body."""
    return [affine_view(op, stop) for op in attention.operands[:3]]


def int8_views(attention: Instruction, source: Instruction) -> tuple[list[View | None], set[int]]:
    """q, k and v as strided views of source (an s32 projection parameter) through view ops and the elementwise
    ops that compute them from it (dequantize, bias, requantize): each elementwise op's one operand that depends
    on source, at the same dims (the others, per-channel scales and constants, do not depend on it). Also the
    ids of every instruction on those paths (the only readers of source the kernel can compute per tile)."""
    deps: dict[int, bool] = {}

    def depends(x: Instruction) -> bool:
        if id(x) not in deps:
            deps[id(x)] = x is source or any(depends(o) for o in x.operands)
        return deps[id(x)]

    views: list[View | None] = []
    path: set[int] = set()
    for op in attention.operands[:3]:
        chain, x, view = [], op, None
        while True:
            path.add(id(x))
            if x is source:
                view = view_of_steps(source, chain)
                break
            if x.opcode in VIEW_OPS:
                chain.append(x)
                x = x.operands[0]
                continue
            reading = [o for o in x.operands if depends(o)]
            if x.opcode not in ELEMENTWISE_OPS or len(reading) != 1 or \
                    tuple(reading[0].shape.dims) != tuple(x.shape.dims):
                break
            x = reading[0]
        views.append(view)
    return views, path


def int8_source(attention: Instruction, dtype: str | None = "s32") -> Instruction | None:
    """The fusion parameter holding an int8 QKV projection (s32) that q, k and v are computed from, if any (with
    dtype None, a parameter of any type they are all computed from)."""
    body = attention.parent
    for param in body.parameters():
        if (dtype is None or param.shape.dtype == dtype) and \
                all(v is not None for v in int8_views(attention, param)[0]):
            return param
    return None


def _mixed_int8(attention: Instruction) -> tuple[Instruction, str] | None:
    """(the s32 projection parameter, which of q, k and v) when some but not all of q, k and v are computed from
    one int8 projection (the others float inputs or another projection's)."""
    for param in attention.parent.parameters():
        if param.shape.dtype == "s32":
            views = int8_views(attention, param)[0]
            if 0 < sum(v is not None for v in views) < 3:
                return param, " and ".join(n for n, v in zip("qkv", views) if v is not None)
    return None


def _why_not_view(name: str, view, dims, n: int, heads: int, d: int) -> str | None:
    """Why the q, k or v view cannot be read as rows of X times columns of W, if so: its seq step must be
    one row of the projection, its head dim contiguous columns, a head's columns inside one row."""
    strides = view.strides
    if strides[-1] != 1 or strides[-2] != n:
        return f"{name} is not a slice of whole projection rows with contiguous head columns"
    col = view.offset % n
    head_stride = strides[-3] if heads > 1 else 0
    outer = [s for s, size in zip(strides[:-3], dims) if size != 1]
    if col + (max(heads, 1) - 1) * head_stride + d > n or any(s % n for s in outer):
        return f"{name}'s heads do not lie within one projection row"
    return None


def why_not_int8(producer: Instruction, consumer: Instruction, attention: Instruction, param: Instruction,
                 outputs: set[int]) -> str | None:
    """Why the int8 projection producer (u8 x s8 -> s32) cannot move into the fake-quantized attention fusion
    consumer, whose q, k and v are computed from its parameter param, if so."""
    if producer.opcode != "dot":
        return f"%{producer.name} is not a plain int8 projection X @ W (a dot of its inputs as they are)"
    if id(producer) in outputs or list(producer.users) != [consumer] or consumer.operands.count(producer) != 1:
        return f"%{producer.name} has other readers than the attention (it must stay on chip for it alone)"
    views, path = int8_views(attention, param)
    work, seen = [param], set()
    while work:  # every reader of the projection computes q, k or v (the mask's operands do not depend on it)
        x = work.pop()
        for u in x.users:
            if u is attention:
                if any(o is x for o in attention.operands[3:]):
                    return f"the attention fusion reads %{producer.name} outside q, k and v"
            elif id(u) not in path:
                return f"the attention fusion reads %{producer.name} outside q, k and v"
            elif id(u) not in seen:
                seen.add(id(u))
                work.append(u)
    why = _why_not_encoder_projection(consumer, attention, producer, _NOT_ENCODER_INT8)
    if why is not None:
        return why
    lhs, rhs = producer.operands
    if lhs.shape.dtype not in INT8 or rhs.shape.dtype not in INT8 or producer.shape.dtype != "s32":
        return (f"mixed quantization: a {lhs.shape.dtype} x {rhs.shape.dtype} -> {producer.shape.dtype} projection, "
                "not 8-bit integers into s32 (the kernel computes u8/s8 x u8/s8 -> s32 tiles)")
    if not all(v.shape.is_static for v in (lhs, rhs, producer, attention, *attention.operands)):
        return "symbolic dims"
    if not (lhs.shape.is_row_major() and producer.shape.is_row_major()):
        return "X or the projection is not row-major"
    return _why_not_qkv(attention, views, param, producer.shape.dims[-1], lhs.shape.dims[-1])


def _why_not_encoder_projection(consumer: Instruction, attention: Instruction, dot: Instruction,
                                not_encoder: tuple[str, ...]) -> str | None:
    """Why the attention fusion consumer is not an encoder self-attention reading the plain matrix projection
    dot (X [..., K] @ W [K, N]), if so: not_encoder names the attention attributes it must not have."""
    if consumer.shape.is_tuple:
        return "the attention fusion stores a KV cache"
    attrs = attention.attrs
    if attrs.get("causal"):
        return "a causal attention (encoder self-attention only)"
    for key in not_encoder:
        if attrs.get(key) is not None and attrs.get(key) != ():
            return f"an attention with {key.replace('_', ' ')} (encoder self-attention only)"
    a = dot.attrs
    lhs, rhs = dot.operands
    if a["lhs_batch_dims"] or a["rhs_batch_dims"] or rhs.shape.rank != 2:
        return "a projection with batch dims or a weight that is not a matrix"
    if list(a["lhs_contracting_dims"]) != [lhs.shape.rank - 1]:
        return "the projection contracts a dim of X that is not its last"
    return None


def _why_not_qkv(attention: Instruction, views: list, param: Instruction, n: int, k_dim: int) -> str | None:
    """Why q, k and v (views of the projection param, n columns, from rows of k_dim inputs) cannot be computed
    as tiles of rows of X times columns of W in one query block, if so."""
    q, k = attention.operands[0].shape, attention.operands[1].shape
    sq, sk, d, dv = q.dims[-2], k.dims[-2], q.dims[-1], attention.operands[2].shape.dims[-1]
    heads = q.dims[-3] if q.rank >= 3 else 0
    kv_heads = k.dims[-3] if k.rank >= 3 else 0
    for name, view, h, width, op in zip("qkv", views, (heads, kv_heads, kv_heads), (d, d, dv), attention.operands):
        if view is None or view.source is not param:
            return f"{name} is not a strided view of the projection"
        why = _why_not_view(name, view, op.shape.dims, n, h, width)
        if why is not None:
            return why
    if sq > MAX_QKV_SEQ:  # (any number of keys: a program's key loop computes each key block's k and v once)
        blocks = -(-sq // MAX_QKV_SEQ)
        extra = (blocks - 1) * 2 * sk * k_dim * (d + dv)
        return (f"{sq} queries span {blocks} query blocks of at most {MAX_QKV_SEQ} (MAX_QKV_SEQ): each block's "
                f"program would recompute its head's K and V projection, {extra:,} FLOPs more per (batch, head) "
                "and X and W read again by each block, where the stored projection is computed once")
    return None


def why_not(producer: Instruction, consumer: Instruction, attention: Instruction, param: Instruction,
            outputs: set[int]) -> str | None:
    """Why the projection producer cannot move into the attention fusion consumer, if so."""
    found = projection_of(producer)
    if found is None:
        return (f"%{producer.name} is not a plain projection X @ W (+ bias): a dot of its inputs as they are, "
                "alone or plus a bias along its last dim")
    dot, value, _ = found
    if id(producer) in outputs or list(producer.users) != [consumer] or consumer.operands.count(producer) != 1:
        return f"%{producer.name} has other readers than the attention (it must stay on chip for it alone)"
    reached, stack = {id(param)}, [param]  # the parameter and its views
    while stack:
        for u in stack.pop().users:
            if u.opcode in VIEW_OPS and id(u) not in reached:
                reached.add(id(u))
                stack.append(u)
            elif u.opcode not in VIEW_OPS and (u is not attention or
                                               any(id(o) in reached for o in attention.operands[3:])):
                return f"the attention fusion reads %{producer.name} outside q, k and v"
    why = _why_not_encoder_projection(consumer, attention, dot, _NOT_ENCODER)
    if why is not None:
        return why
    lhs, rhs = dot.operands
    if any(v.shape.dtype not in FLOATS for v in (lhs, rhs, dot)) or \
            len({lhs.shape.dtype, rhs.shape.dtype, dot.shape.dtype, attention.operands[0].shape.dtype}) != 1:
        return "not one float type for X, W, the projection and q (float weights only)"
    if not all(v.shape.is_static for v in (lhs, rhs, dot, attention, *attention.operands)):
        return "symbolic dims"
    if not (lhs.shape.is_row_major() and value.shape.is_row_major() and dot.shape.is_row_major()):
        return "X or the projection is not row-major"
    return _why_not_qkv(attention, qkv_views(attention), param, dot.shape.dims[-1], lhs.shape.dims[-1])


class QkvAttentionFusion(Pass):
    name = "qkv-attention-fusion"

    def __init__(self, kinds: frozenset[str] = frozenset({"attention"})) -> None:
        self.kinds = kinds  # the fusion kinds the backend has kernels for

    def run(self, module: Module) -> bool:
        if "attention" not in self.kinds:
            return False
        comp = module.entry
        outputs = comp.returned_ids()
        changed = False
        notes: list[str] = []
        for inst in list(comp.instructions):
            if inst.parent is not comp or inst.opcode != "fusion" or inst.attrs.get("kind") != "attention":
                continue
            found = [i for i in inst.called.instructions if i.opcode == "attention"]
            if len(found) != 1 or any(i.opcode == "dot" for i in inst.called.instructions):
                continue
            attention = found[0]
            param = int8_source(attention) if attention.attrs.get("score_quant") else None
            mixed = _mixed_int8(attention) if attention.attrs.get("score_quant") and param is None else None
            if mixed is not None:
                source, names = mixed
                notes.append(f"%{inst.operands[source.attrs['index']].name} -> %{inst.name}: the QKV projection is "
                             f"not computed in the attention kernel: mixed quantization: only {names} computed from "
                             "the int8 projection (the kernel computes all three from its s32 tiles)")
                continue
            other = int8_source(attention, None) if attention.attrs.get("score_quant") and param is None else None
            if other is not None and _dots(inst.operands[other.attrs["index"]]):
                producer = inst.operands[other.attrs["index"]]
                types = " x ".join(o.shape.dtype for o in _dots(producer)[0].operands)
                notes.append(f"%{producer.name} -> %{inst.name}: the QKV projection is not computed in the attention "
                             f"kernel: a {types} -> {other.shape.dtype} projection of a fake-quantized attention "
                             "(only 8-bit integer ones, u8/s8 x s8 -> s32, are computed in its kernel)")
                continue
            if param is None:
                sources = {id(v.source): v.source for v in qkv_views(attention) if v is not None}
                if len(sources) != 1:
                    continue
                (param,) = sources.values()
                if param.opcode != "parameter":
                    continue
            producer = inst.operands[param.attrs["index"]]
            if not _dots(producer):
                continue
            int8 = param.shape.dtype == "s32"
            why = (why_not_int8 if int8 else why_not)(producer, inst, attention, param, outputs)
            if why is None:
                if _merge(module, comp, inst, producer) is not None:
                    stale = tuple(f"%{n} -> %" for n in _names(producer))
                    module.analyses.fusion_explanations = [
                        line for line in module.analyses.fusion_explanations if not line.startswith(stale)]
                    changed = True
                    continue
                why = f"the kernel would read more than {MAX_PARAMETERS} buffers"
            notes.append(f"%{producer.name} -> %{inst.name}: the QKV projection is not computed in the "
                         f"attention kernel: {why}")
        module.analyses.fusion_explanations = list(module.analyses.fusion_explanations) + notes
        return changed


def _dots(inst: Instruction) -> list[Instruction]:
    """The dots a bare dot or an output fusion computes."""
    if inst.opcode == "dot":
        return [inst]
    if inst.opcode == "fusion" and inst.attrs.get("kind") == "output" and inst.called is not None:
        return [i for i in inst.called.instructions if i.opcode == "dot"]
    return []


def _names(producer: Instruction) -> list[str]:
    """The names Fusion's explanations give the projection's result (the bare dot, or the fusion's root)."""
    return [producer.called.root.name if producer.opcode == "fusion" else producer.name]


def _merge(module: Module, comp: Computation, consumer: Instruction, producer: Instruction) -> Instruction | None:
    """The attention fusion consumer with producer's projection inlined in its body; None if it would read
    too many buffers. Parameters are numbered in the order a walk from the root first reads them (as Fusion
    numbers them), so two layers' attentions are one kernel."""
    body = Computation("")
    params: list[Instruction] = []
    param_of: dict[int, Instruction] = {}
    clone: dict[tuple[int, int], Instruction] = {}

    def outer(x: Instruction) -> Instruction:  # an entry value read by the merged kernel
        if x is producer:
            return inner(producer.called.root, producer) if producer.opcode == "fusion" else inner(producer, None)
        found = param_of.get(id(x))
        if found is None:
            found = body.add(Instruction(f"param_{len(params)}", "parameter", x.shape, (), {"index": len(params)}))
            param_of[id(x)] = found
            params.append(x)
        return found

    def inner(x: Instruction, fusion: Instruction | None) -> Instruction:  # x of fusion's body (or the bare dot)
        key = (id(x), id(fusion))
        if key in clone:
            return clone[key]
        if x.opcode == "parameter" and fusion is not None:
            made = outer(fusion.operands[x.attrs["index"]])
        else:
            operands = [inner(o, fusion) if fusion is not None else outer(o) for o in x.operands]
            made = body.add(Instruction(body.unique_name(x.name), x.opcode, x.shape, operands, x.attrs, x.called,
                                        x.origin))
        clone[key] = made
        return made

    body.root = inner(consumer.called.root, consumer)
    if len(params) > MAX_PARAMETERS:
        return None
    body.instructions = body.parameters() + [i for i in body.instructions if i.opcode != "parameter"]
    old = consumer.called
    module.computations = [c for c in module.computations if c is not old and
                           not (producer.opcode == "fusion" and c is producer.called)]
    body.name = _unique_comp_name(module, old.name)
    module.add_computation(body)
    origin = tuple(dict.fromkeys(producer.origin + consumer.origin))
    merged = comp.insert_before(consumer, Instruction(consumer.name, "fusion", consumer.shape, params,
                                                      {"kind": "attention"}, body, origin))
    consumer.replace_all_uses_with(merged)
    comp.remove(consumer)
    comp.remove(producer)
    return merged
