"""Attention-layer fusion: an encoder's output projection, bias, residual add and LayerNorm computed inside the
attention kernel that computes its QKV projection, so the attention output never reaches memory.

After Fusion, B2bFusion and QkvAttentionFusion an encoder self-attention block is two kernels: the attention
fusion (QKV projection, scores, softmax, times v: [..., H, S, Dv] stored as [..., S, H * Dv]) and an output
fusion reading it through views (transpose and reshape are bitcasts)::

    %fusion.attention.1 = f32[1,4,16,16]{3,1,2,0} fusion(%x, %w_qkv, %mask...), kind=attention
    %reshape.5 = f32[1,16,64]{2,1,0} bitcast(%transpose.4)   (of %fusion.attention.1)
    %fusion.layer-norm.1 = f32[1,16,64]{2,1,0} fusion(%reshape.5, %w_o, %x), kind=output
        (layer-norm(dot(%reshape.5, %w_o) [+ bias] + %x))
 -> %fusion.attention.1 = f32[1,16,64]{2,1,0} fusion(%x, %w_qkv, %mask..., %w_o), kind=attention

The attention kernel (mlcc/emit/codegen/attention.py, the ``layer`` branch of templates/attention.py.jinja)
then runs one program per batch element covering every head: it loops over the heads, and adds each head's
normalized [S, Dv] output times the rows h * Dv .. (h + 1) * Dv of W_o into a [S, E] accumulator, then
applies the epilogue (bias, residual) and normalizes the rows. The residual is usually the layer's input X,
which the kernel reads anyway for its QKV projection: one read instead of two kernels' reads.

Taken only where one program holds it all: the whole sequence in one query block (S <= MAX_QKV_SEQ, as the
QKV projection in the kernel already needs) and the hidden size E in one tile (E <= MAX_LAYER_HIDDEN, the
[S, E] f32 accumulator in registers); the attention fusion must compute its QKV projection, store nothing but
its attention result (no KV cache, no epilogue), and the output fusion must hold one dot reading the attention
output (and nothing else reading it) and normalize that dot's output rows. Refusals go to ``--explain-fusion``.

Then the FFN: where such a layer fusion's normalized rows are read only by a b2b fusion (B2bFusion's FFN:
y @ W1, an elementwise epilogue such as GELU, @ W2, the residual y and a row norm; not gated, weights read as
stored, float), that fusion joins too (why_not_ffn, ffn_parts): the kernel runs the FFN on the rows it holds,
BLOCK_H hidden columns at a time, so an encoder layer is one launch and the first norm's output is never
stored either::

    %fusion.attention.1 = f32[1,16,64] fusion(%x, %w_qkv, %mask..., %w_o), kind=attention   (rows y)
    %fusion.layer-norm.2 = f32[1,16,64] fusion(%fusion.attention.1, %w1, %w2), kind=b2b
 -> %fusion.attention.1 = f32[1,16,64] fusion(%x, %w_qkv, %mask..., %w_o, %w1, %w2), kind=attention

An int8 encoder (QDQ or QOperator) is taken too: its fake-quantized attention kernel (which computes its u8 x s8
QKV projection: qkv_attention.py) stores its output requantized to u8 (the attention's epilogue: the
QuantizeLinear after it), and the output fusion's dot is u8 x s8 -> s32 with the dequantization, bias,
residual and their requantizations in its epilogue. The kernel applies that epilogue to each head's output
tile and multiplies the u8 tile on the integer tensor cores (int8_output): the requantization is computed
where the stored one was, and the u8 attention output is never stored.
"""

from __future__ import annotations

import math

from mlcc.hlo.ir import Computation, Instruction, Module
from mlcc.hlo.opcodes import ELEMENTWISE_OPS, ops_with
from mlcc.hlo.passes.fusion import MAX_PARAMETERS, _unique_comp_name
from mlcc.hlo.passes.pass_manager import Pass
from mlcc.hlo.passes.qkv_attention import FLOATS, INT8, MAX_QKV_SEQ

# What one program holds without spilling registers on sm_80, sm_90 and gfx942 (measured with `mlcc inspect
# --binaries` on f32 layers, 2026-11-28): the [S, E] output projection accumulator for E <= 64 (S <= 64); with
# the FFN too (its rows, its accumulator and a hidden chunk live at once) S * E <= 2048 (powers of two): a
# [64, 64] layer with its FFN spilled on sm_80, and a hidden size of 128 on sm_80 or sm_90.
MAX_LAYER_HIDDEN = 64
# An int8 layer kernel reads more buffers than Fusion's MAX_PARAMETERS: each int8 GEMM's per-channel weight
# scale, its folded zero-point term (the activation zero point times W's column sums) and its bias are vectors of
# their own, three per GEMM (each of q, k and v counting as one); a layer with its FFN reads 27 (X, 4 weights,
# 20 vectors, 2 norms' scales and biases besides). They are small and read once a program.
MAX_INT8_LAYER_PARAMETERS = 32
MAX_FFN_TILE = 2048
ROW_NORMS = ops_with("row_norm")


def _below_bitcasts(x: Instruction) -> Instruction:
    while x.opcode == "bitcast":
        x = x.operands[0]
    return x


def _fixed(x: Instruction) -> bool:
    """A constant, a parameter, or a broadcast of one (a scale, zero point or clamp bound of a requantization)."""
    while x.opcode == "broadcast":
        x = x.operands[0]
    return x.opcode in ("constant", "parameter")


def below_requantize(x: Instruction) -> Instruction:
    """x below bitcasts and elementwise ops whose other operands are fixed (constants, parameters, broadcasts of
    them): the value an int8 requantization (scale, round, zero point, clamp, convert) or views start from."""
    while True:
        x = _below_bitcasts(x)
        if x.opcode not in ELEMENTWISE_OPS:
            return x
        inner = [o for o in x.operands if not _fixed(o)]
        if len(inner) != 1 or tuple(inner[0].shape.dims) != tuple(x.shape.dims):
            return x
        x = inner[0]


def int8_output(body: Computation, attention: Instruction) -> bool:
    """Whether an attention fusion body stores the fake-quantized attention's output requantized to 8-bit
    integers (its root an elementwise chain from the attention, each op read by the next alone)."""
    root = body.root
    if not attention.attrs.get("score_quant") or root.shape.dtype not in INT8 or root.opcode == "bitcast" or \
            below_requantize(root) is not attention:
        return False
    x = root
    while x is not attention:
        inner = [o for o in x.operands if not _fixed(o)]
        if len(inner[0].users) != 1:
            return False
        x = inner[0]
    return True


def layer_parts(body: Computation) -> tuple[Instruction, Instruction, Instruction] | None:
    """(attention, output projection dot, row norm) of a merged attention-layer body: the dot whose lhs is the
    attention's result through views, and the row norm of that dot's output (the first, with the FFN joined);
    None for any other body."""
    attentions = [i for i in body.instructions if i.opcode == "attention"]
    if len(attentions) != 1:
        return None
    (attention,) = attentions
    dots = [i for i in body.instructions if i.opcode == "dot" and (
        _below_bitcasts(i.operands[0]) is attention or
        i.shape.dtype == "s32" and below_requantize(i.operands[0]) is attention)]
    norms = [i for i in body.instructions if i.opcode in ROW_NORMS]
    if len(dots) != 1 or not 1 <= len(norms) <= 2:
        return None
    first = [n for n in norms if _depends(n, dots[0]) and not any(m is not n and _depends(n, m) for m in norms)]
    if len(first) != 1:
        return None
    return attention, dots[0], first[0]


def ffn_parts(body: Computation, norm: Instruction) -> tuple[Instruction, Instruction, Instruction] | None:
    """(the FFN's first dot, its second, the second row norm) of a merged attention-layer body whose FFN joined
    it (the first dot reads the first norm's rows), or None."""
    dots1 = [i for i in body.instructions if i.opcode == "dot" and (
        _below_bitcasts(i.operands[0]) is norm or i.shape.dtype == "s32" and below_requantize(i.operands[0]) is norm)]
    norms = [i for i in body.instructions if i.opcode in ROW_NORMS and i is not norm]
    if len(dots1) != 1 or len(norms) != 1:
        return None
    dots2 = [i for i in body.instructions if i.opcode == "dot" and i is not dots1[0] and _depends(i, dots1[0])]
    if len(dots2) != 1 or not _depends(norms[0], dots2[0]):
        return None
    return dots1[0], dots2[0], norms[0]


def _depends(x: Instruction, target: Instruction) -> bool:
    work, seen = [x], set()
    while work:
        y = work.pop()
        if y is target:
            return True
        if id(y) not in seen:
            seen.add(id(y))
            work.extend(y.operands)
    return False


def why_not(attn: Instruction, views: list[Instruction], consumer: Instruction, outputs: set[int]) -> str | None:
    """Why the output fusion consumer (reading the attention fusion attn through the entry views) cannot be
    computed in the attention kernel, if so."""
    body = attn.called
    attentions = [i for i in body.instructions if i.opcode == "attention"]
    if len(attentions) != 1:
        return "the attention fusion computes more than the attention (an epilogue or a second result)"
    attention = attentions[0]
    int8 = int8_output(body, attention)
    if body.root is not attention and not int8:
        return "the attention fusion computes more than the attention (an epilogue or a second result)"
    if not any(i.opcode == "dot" for i in body.instructions):
        return "the attention kernel does not compute its QKV projection (q, k and v are read from memory)"
    for a, b in zip([attn, *views], [*views, consumer]):
        if id(a) in outputs or list(a.users) != [b]:
            return f"the attention output %{a.name} has other readers (it must stay on chip for the projection)"
    if consumer.opcode != "fusion" or consumer.attrs.get("kind") != "output" or consumer.shape.is_tuple:
        return "the reader is not an output fusion of one result"
    cbody = consumer.called
    dots = [i for i in cbody.instructions if i.opcode == "dot"]
    if len(dots) != 1:
        return "the output fusion computes more than one dot"
    dot = dots[0]
    lhs = dot.operands[0]
    param = _below_bitcasts(lhs)
    if param.opcode != "parameter" or consumer.operands[param.attrs["index"]] is not (views[-1] if views else attn):
        return "the output fusion's dot does not multiply the attention output"
    if consumer.operands.count(views[-1] if views else attn) != 1:
        return "the output fusion reads the attention output outside its dot"
    reader, x = dot, lhs
    while True:
        if list(x.users) != [reader]:
            return "the output fusion reads the attention output outside its dot"
        if x.opcode != "bitcast":
            break
        reader, x = x, x.operands[0]
    norms = [i for i in cbody.instructions if i.opcode in ROW_NORMS]
    if len(norms) != 1 or not _depends(norms[0], dot) or not _depends(cbody.root, norms[0]):
        return "the output fusion does not normalize the projection's rows (a LayerNorm or RMSNorm after it)"
    norm = norms[0]
    if list(norm.attrs["dimensions"]) != [norm.shape.rank - 1] or tuple(norm.shape.dims) != tuple(dot.shape.dims) \
            or tuple(cbody.root.shape.dims) != tuple(dot.shape.dims):
        return "the norm does not normalize the projection's last dim"
    a = dot.attrs
    w = dot.operands[1]
    if a["lhs_batch_dims"] or a["rhs_batch_dims"] or w.shape.rank != 2 or w.opcode != "parameter":
        return "the projection has batch dims or a weight that is not a matrix read as stored"
    if list(a["lhs_contracting_dims"]) != [lhs.shape.rank - 1]:
        return "the projection contracts a dim of the attention output that is not its last"
    q = attention.operands[0].shape
    if q.rank < 3 or not all(v.shape.is_static for v in (attention, dot, consumer, w, lhs)):
        return "symbolic dims or attention without heads"
    heads, sq, dv = q.dims[-3], q.dims[-2], attention.shape.dims[-1]
    batch = tuple(q.dims[:-3])
    if int8:
        if lhs.shape.dtype not in INT8 or w.shape.dtype not in INT8 or dot.shape.dtype != "s32" or \
                lhs.shape.dtype != body.root.shape.dtype:
            return (f"mixed quantization: the attention output is requantized to {body.root.shape.dtype} and "
                    f"projected as {lhs.shape.dtype} x {w.shape.dtype} -> {dot.shape.dtype} (8-bit integers into "
                    "s32 only)")
    elif any(v.shape.dtype not in FLOATS for v in (dot, w, lhs)) or \
            len({dot.shape.dtype, w.shape.dtype, lhs.shape.dtype, attention.shape.dtype}) != 1:
        return "not one float type for the attention output, the weight and the projection"
    # the attention output laid out [batch..., S, H, Dv] row-major, read as [batch..., S, H * Dv]
    st = body.root.shape.strides()
    if tuple(st[-3:]) != (dv, heads * dv, 1) or \
            any(s != sq * heads * dv * math.prod(int(d) for d in batch[i + 1:]) for i, s in enumerate(st[:-3])):
        return "the attention output is not stored as rows of all heads' features ([..., S, H, Dv])"
    if tuple(lhs.shape.dims) != batch + (sq, heads * dv) or not lhs.shape.is_row_major():
        return "the projection does not read the attention output as [..., S, H * Dv] rows"
    if not consumer.shape.is_row_major() or not dot.shape.is_row_major():
        return "the normalized rows are not row-major"
    if sq > MAX_QKV_SEQ:
        return f"{sq} queries do not fit one program (at most {MAX_QKV_SEQ}, MAX_QKV_SEQ)"
    e = dot.shape.dims[-1]
    if e > MAX_LAYER_HIDDEN:
        return f"a hidden size of {e} is wider than one program's tile (at most {MAX_LAYER_HIDDEN}, MAX_LAYER_HIDDEN)"
    return None


def why_not_ffn(layer: Instruction, b2b: Instruction, outputs: set[int]) -> str | None:
    """Why the b2b fusion (an FFN: dot, elementwise epilogue, dot, residual and row norm) reading an attention
    layer's normalized rows cannot be computed in the attention kernel too, if so."""
    parts = layer_parts(layer.called)
    root = layer.called.root
    int8 = parts is not None and parts[1].shape.dtype == "s32"  # an int8 layer: its rows requantized
    if parts is None or ffn_parts(layer.called, parts[2]) is not None or \
            (root is not parts[2] and not (int8 and root.shape.dtype in INT8 and below_requantize(root) is parts[2])):
        return "the attention kernel's result is not its first norm's rows"
    if id(layer) in outputs or list(layer.users) != [b2b] or b2b.operands.count(layer) != 1:
        return f"%{layer.name} has other readers (its rows must stay on chip for the FFN alone)"
    body = b2b.called
    dots = [i for i in body.instructions if i.opcode == "dot"]
    norms = [i for i in body.instructions if i.opcode in ROW_NORMS]
    if len(dots) != 2 or len(norms) != 1:
        return "the FFN is not two dots and a norm of the second's rows (a gated MLP or a norm prologue)"
    param = next(p for p in body.parameters() if b2b.operands[p.attrs["index"]] is layer)
    dot1 = next((d for d in dots if _below_bitcasts(d.operands[0]) is param), None)
    if dot1 is None:
        return "the FFN's first dot does not multiply the attention kernel's rows"
    dot2 = next(d for d in dots if d is not dot1)
    norm = norms[0]
    if not _depends(dot2, dot1) or not _depends(norm, dot2) or \
            (body.root is not norm and not (int8 and below_requantize(body.root) is norm)):
        return "the FFN is not dot, epilogue, dot, norm"
    for d in (dot1, dot2):
        a = d.attrs
        w = d.operands[1]
        if a["lhs_batch_dims"] or a["rhs_batch_dims"] or w.opcode != "parameter" or w.shape.rank != 2 or \
                list(a["lhs_contracting_dims"]) != [d.operands[0].shape.rank - 1]:
            return "an FFN dot with batch dims, a weight computed in its loads, or contracting another dim"
        if int8:
            if d.shape.dtype != "s32" or w.shape.dtype not in INT8 or d.operands[0].shape.dtype not in INT8:
                return (f"mixed quantization: an FFN dot of {d.operands[0].shape.dtype} x {w.shape.dtype} -> "
                        f"{d.shape.dtype} in an int8 layer (8-bit integers into s32 only)")
        elif {d.shape.dtype, w.shape.dtype, d.operands[0].shape.dtype} != {layer.shape.dtype}:
            return "not one float type for the rows, the FFN's weights and products"
    rows, e = layer.shape.dims[-2], layer.shape.dims[-1]
    if _pow2(rows) * _pow2(e) > MAX_FFN_TILE:
        return (f"[{rows}, {e}] rows with the FFN's accumulators exceed one program's registers (at most "
                f"{MAX_FFN_TILE} elements, MAX_FFN_TILE)")
    if tuple(dot2.shape.dims) != tuple(layer.shape.dims) or tuple(norm.shape.dims) != tuple(layer.shape.dims) or \
            list(norm.attrs["dimensions"]) != [norm.shape.rank - 1] or not b2b.shape.is_row_major():
        return "the FFN's output rows are not the attention layer's rows"
    if any(u is not dot1 and tuple(u.shape.dims) != tuple(param.shape.dims) for u in param.users):
        return "the FFN reads the rows other than in its first dot and elementwise"
    return None


def _pow2(n) -> int:
    return max(16, 1 << (int(n) - 1).bit_length())


class AttentionLayerFusion(Pass):
    name = "attention-layer-fusion"

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
            if inst.parent is not comp or inst.opcode != "fusion" or inst.attrs.get("kind") != "attention" or \
                    inst.shape.is_tuple:
                continue
            views: list[Instruction] = []
            x = inst
            while len(x.users) == 1 and next(iter(x.users)).opcode == "bitcast":
                x = next(iter(x.users))
                views.append(x)
            readers = [u for u in x.users if u.opcode == "fusion" and u.called is not None and
                       any(i.opcode == "dot" for i in u.called.instructions)]
            if len(readers) != 1:
                continue  # no one projection reads the attention output: nothing to explain
            consumer = readers[0]
            why = why_not(inst, views, consumer, outputs)
            limit = MAX_INT8_LAYER_PARAMETERS if why is None and _int8_layer(inst) else MAX_PARAMETERS
            if why is None:
                merged = _merge(module, comp, inst, views, consumer, limit)
                if merged is not None:
                    stale = tuple(f"%{v.name} -> %" for v in views)
                    inside = {i.name for i in merged.called.instructions}
                    module.analyses.fusion_explanations = [
                        line for line in module.analyses.fusion_explanations
                        if not line.startswith(stale) and not _edge_inside(line, inside)]
                    changed = True
                    continue
                why = f"the kernel would read more than {limit} buffers"
            notes.append(f"%{inst.name} -> %{consumer.name}: the output projection and norm are not computed in the "
                         f"attention kernel: {why}")
        for inst in list(comp.instructions):  # then each layer's FFN, where it reads the normalized rows alone
            if inst.parent is not comp or inst.opcode != "fusion" or inst.attrs.get("kind") != "attention" or \
                    layer_parts(inst.called) is None:
                continue
            readers = [u for u in inst.users if u.opcode == "fusion" and u.attrs.get("kind") == "b2b"]
            if len(readers) != 1:
                continue
            why = why_not_ffn(inst, readers[0], outputs)
            limit = MAX_INT8_LAYER_PARAMETERS if _int8_layer(inst) else MAX_PARAMETERS
            if why is None:
                root = inst.called.root  # the first norm (or its requantization in an int8 layer)
                merged = _merge(module, comp, inst, [], readers[0], limit)
                if merged is not None:
                    # b2b's word on the first norm's fusion (named after its root) and the FFN, and Fusion's on
                    # edges now inside the kernel: one kernel now
                    stale = f"%fusion.{root.name} -> %"
                    inside = {i.name for i in merged.called.instructions}
                    module.analyses.fusion_explanations = [
                        line for line in module.analyses.fusion_explanations
                        if not line.startswith(stale) and not _edge_inside(line, inside)]
                    changed = True
                    continue
                why = f"the kernel would read more than {limit} buffers"
            notes.append(f"%{inst.name} -> %{readers[0].name}: the FFN is not computed in the attention kernel: {why}")
        module.analyses.fusion_explanations = list(module.analyses.fusion_explanations) + notes
        return changed


def _int8_layer(attn: Instruction) -> bool:
    """Whether an attention fusion is an int8 one (a fake-quantized attention storing its output as 8-bit
    integers), whose layer kernel may read up to MAX_INT8_LAYER_PARAMETERS buffers."""
    attentions = [i for i in attn.called.instructions if i.opcode == "attention"]
    return len(attentions) == 1 and (int8_output(attn.called, attentions[0]) or
                                     any(i.opcode == "dot" and i.shape.dtype == "s32" and
                                         below_requantize(i.operands[0]) is attentions[0]
                                         for i in attn.called.instructions))


def _edge_inside(line: str, names: set[str]) -> bool:
    """Whether an explanation "%a -> %b: ..." is about an edge between two of names (one kernel's values)."""
    head = line.split(": ", 1)[0].split(" -> ")
    return len(head) == 2 and all(h.startswith("%") and h[1:] in names for h in head)


def _merge(module: Module, comp: Computation, attn: Instruction, views: list[Instruction],
           consumer: Instruction, limit: int = MAX_PARAMETERS) -> Instruction | None:
    """The attention fusion attn with the views and consumer's body inlined after its root; None if it would
    read too many buffers. Parameters are numbered in the order a walk from the root first reads them."""
    body = Computation("")
    params: list[Instruction] = []
    param_of: dict[int, Instruction] = {}
    clone: dict[tuple[int, int], Instruction] = {}
    view_ids = {id(v) for v in views}

    def outer(x: Instruction) -> Instruction:  # an entry value read by the merged kernel
        if x is attn:
            return inner(attn.called.root, attn)
        if id(x) in view_ids:
            key = (id(x), 0)
            if key not in clone:
                clone[key] = body.add(Instruction(body.unique_name(x.name), "bitcast", x.shape,
                                                  [outer(x.operands[0])], x.attrs, None, x.origin))
            return clone[key]
        found = param_of.get(id(x))
        if found is None:
            found = body.add(Instruction(f"param_{len(params)}", "parameter", x.shape, (), {"index": len(params)}))
            param_of[id(x)] = found
            params.append(x)
        return found

    def inner(x: Instruction, fusion: Instruction) -> Instruction:  # x of fusion's body
        key = (id(x), id(fusion))
        if key in clone:
            return clone[key]
        if x.opcode == "parameter":
            made = outer(fusion.operands[x.attrs["index"]])
        else:
            operands = [inner(o, fusion) for o in x.operands]
            made = body.add(Instruction(body.unique_name(x.name), x.opcode, x.shape, operands, x.attrs, x.called,
                                        x.origin))
        clone[key] = made
        return made

    body.root = inner(consumer.called.root, consumer)
    if len(params) > limit:
        return None
    body.instructions = body.parameters() + [i for i in body.instructions if i.opcode != "parameter"]
    old = attn.called
    module.computations = [c for c in module.computations if c is not old and c is not consumer.called]
    body.name = _unique_comp_name(module, old.name)
    module.add_computation(body)
    origin = tuple(dict.fromkeys(attn.origin + tuple(o for v in views for o in v.origin) + consumer.origin))
    merged = comp.insert_before(consumer, Instruction(attn.name, "fusion", consumer.shape, params,
                                                      {"kind": "attention"}, body, origin))
    consumer.replace_all_uses_with(merged)
    comp.remove(consumer)
    for v in reversed(views):
        comp.remove(v)
    comp.remove(attn)
    return merged
