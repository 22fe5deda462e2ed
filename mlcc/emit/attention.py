"""The attention kernel (FlashAttention-style): template attention.py.jinja.

q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv] -> [..., Sq, Dv]. A program owns
a block of queries of one (batch..., head) pair (grid axis 1) and streams K/V
blocks with an online softmax, so the score matrix is never materialized. The
causal limit and the mask are applied in the kernel: a pred mask keeps scores,
any other mask is added, and a mask broadcasts by a stride of 0 along its size-1
or missing dims. With fewer k/v heads than q heads (grouped-query), q head h
reads kv head h // (Hq / Hkv).

An attention fusion computes its mask in the kernel: the loop ops producing it are evaluated per
[BLOCK_M, BLOCK_N] score tile at the tile's coordinates (mlcc/emit/fused.py), so the mask is never
materialized either; q, k and v are the fusion's parameters, read as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlcc.emit.coords import MAX_GRID_Y, Axis, clamp_pow2, is_wide, merge_axes, numel, static_dims, strides
from mlcc.emit.fused import (FusedOperand, Lanes, Section, TileEmitter, broadcast_coords, epilogue, heavy_op,
                             needs_int64, pointer_params, read_in_place)
from mlcc.emit.kernel import Kernel, LaunchConfig, cdiv, lowering, render, tl_type, triton_pointer
from mlcc.errors import UnsupportedError
from mlcc.hlo.ir import Instruction, Shape


@dataclass(frozen=True)
class TileStrides:
    seq: int      # stride along the sequence dim (queries for the mask)
    feature: int  # stride along the head dim (keys for the mask)


def _tile_strides(shape: Shape) -> TileStrides:
    s = strides(shape)
    return TileStrides(s[-2], s[-1])


def _broadcast_strides(mask: Shape, score_dims: tuple[int, ...]) -> tuple[int, ...]:
    """The mask's stride along each dim of the [..., Sq, Sk] scores (0 where it broadcasts)."""
    ms = strides(mask)
    lead = len(score_dims) - mask.rank
    if lead < 0:
        raise ValueError(f"attention mask {mask} has more dims than the scores {list(score_dims)}")
    out = []
    for i, size in enumerate(score_dims):
        j = i - lead
        if j < 0 or mask.dims[j] == 1:
            out.append(0)
        elif mask.dims[j] == size:
            out.append(ms[j])
        else:
            raise ValueError(f"attention mask {mask} does not broadcast to scores {list(score_dims)}")
    return tuple(out)


def _launch(sq: int, sk: int, d: int, dv: int, bh: int, dtype: str, interpreter: bool) -> LaunchConfig:
    if bh > MAX_GRID_Y:
        raise UnsupportedError(f"{bh} (batch, head) pairs exceed the grid's axis-1 limit of {MAX_GRID_Y}")
    block_d, block_dv = clamp_pow2(d, 16, 1 << 20), clamp_pow2(dv, 16, 1 << 20)
    wide_head = max(block_d, block_dv) > 64
    if interpreter:
        block_m, block_n = clamp_pow2(sq, 16, 256), clamp_pow2(sk, 16, 512)
        warps, stages = 4, 1
    elif dtype in ("f16", "bf16"):   # tensor cores: big query tiles
        block_m, block_n = clamp_pow2(sq, 16, 64 if wide_head else 128), clamp_pow2(sk, 16, 64)
        warps, stages = (8, 2) if wide_head else (4, 3)
    else:   # f32 (exact) and f64 run on FMA units: small tiles keep registers and shared memory in bounds
        block_m, block_n = clamp_pow2(sq, 16, 32 if wide_head or dtype == "f64" else 64), clamp_pow2(sk, 16, 32)
        warps, stages = 4, 2
    constexprs = {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_D": block_d, "BLOCK_DV": block_dv}
    if dtype == "bf16":   # see mlcc.emit.contraction: the interpreter multiplies bf16 in f32
        constexprs["DOT_F32"] = int(interpreter)
    return LaunchConfig(constexprs, (max(1, cdiv(sq, block_m)), max(1, bh), 1), num_warps=warps, num_stages=stages)


@lowering("attention")
def lower_attention(inst: Instruction, kernel_name: str) -> Kernel:
    qkv = [FusedOperand(i, op.shape) for i, op in enumerate(inst.operands[:3])]
    return attention_kernel(inst, kernel_name, qkv, None)


@lowering("fusion:attention")
def lower_attention_fusion(inst: Instruction, kernel_name: str) -> Kernel:
    """Attention with its mask computed in the kernel (and any elementwise epilogue on its result)."""
    heavy = heavy_op(inst, ("attention",))
    return attention_kernel(heavy, kernel_name, [read_in_place(op, inst) for op in heavy.operands[:3]], inst)


def attention_kernel(inst: Instruction, kernel_name: str, qkv: list[FusedOperand],
                     fusion: Instruction | None) -> Kernel:
    """The kernel of attention inst reading q, k, v from qkv; the mask and the epilogue from fusion if any."""
    q, k, v = (op.shape for op in qkv)
    mask = inst.operands[3].shape if len(inst.operands) > 3 else None
    out = (fusion or inst).shape
    qd, kd = static_dims(q, inst), static_dims(k, inst)
    vd = static_dims(v, inst)
    rank = q.rank
    sq, d, sk, dv = qd[-2], qd[-1], kd[-2], vd[-1]
    if k.rank != rank or v.rank != rank:
        raise ValueError(f"%{inst.name}: q, k and v must have the same rank")
    heads = qd[-3] if rank >= 3 else 0
    kv_heads = kd[-3] if rank >= 3 else 0
    if heads and (kv_heads == 0 or heads % kv_heads):
        raise ValueError(f"%{inst.name}: {heads} query heads do not split into groups of {kv_heads} kv heads")
    group = heads // kv_heads if heads else 1

    qs, ks, vs = (tuple(op.view_strides) if op.view_strides is not None else tuple(strides(op.shape)) for op in qkv)
    lead_strides = [qs[:-2], tuple(strides(out))[:-2], ks[:-2], vs[:-2]]
    if mask is not None and fusion is None:
        lead_strides.append(_broadcast_strides(mask, qd[:-1] + (sk,))[:-2])
    n_outer = max(rank - 3, 0)
    outer_axes = merge_axes(Axis(qd[i], tuple(s[i] for s in lead_strides)) for i in range(n_outer))
    head_strides = tuple(s[rank - 3] for s in lead_strides) if heads else ()
    if mask is not None:
        mask_strides = _broadcast_strides(mask, qd[:-1] + (sk,))  # (checks that it broadcasts)
        mask_tile = TileStrides(mask_strides[-2], mask_strides[-1])
        mask_kind = "pred" if mask.dtype == "pred" else "additive"
    else:
        mask_tile, mask_kind = TileStrides(0, 0), "none"
    batch_heads = numel(qd[:-2])

    compute = "f64" if q.dtype == "f64" else "f32"
    names = [f"in{i}" for i in range(len(inst.operands))] + ["out0"]
    pointers = [triton_pointer(op.shape) for op in inst.operands] + [triton_pointer(out)]
    wide = is_wide(q, k, v, out)
    fused: dict[str, Section | None] = {"mask_section": None, "epilogue": None}
    flops = 2 * batch_heads * sq * sk * (d + dv)
    if fusion is not None:
        names = pointer_params(fusion)
        pointers = [triton_pointer(op.shape) for op in fusion.operands] + [triton_pointer(out)]
        wide = needs_int64(fusion, q, k, v, out)
        fused, ops = _fused_sections(inst, fusion, compute, wide)
        flops += ops
    source = render("attention.py.jinja", kernel_name=kernel_name, params=names,
                    q_ptr=qkv[0].ptr, k_ptr=qkv[1].ptr, v_ptr=qkv[2].ptr, sq=sq, sk=sk, d=d, dv=dv,
                    heads=heads, group=group, outer_axes=outer_axes, head_strides=head_strides,
                    q=TileStrides(qs[-2], qs[-1]), k=TileStrides(ks[-2], ks[-1]), v=TileStrides(vs[-2], vs[-1]),
                    out=_tile_strides(out),
                    mask=mask_tile, mask_kind=mask_kind, causal=bool(inst.attrs["causal"]),
                    scale=float(inst.attrs["scale"]), ieee=q.dtype in ("f32", "f64"), bf16_dot=q.dtype == "bf16",
                    compute_type=tl_type(compute), value_type=tl_type(v.dtype), out_type=tl_type(out.dtype),
                    wide=wide, **fused)
    return Kernel(kernel_name, "attention.py.jinja", source, pointers,
                  gpu=_launch(sq, sk, d, dv, batch_heads, q.dtype, interpreter=False),
                  interpreter=_launch(sq, sk, d, dv, batch_heads, q.dtype, interpreter=True), flops=flops)


def _fused_sections(inst: Instruction, fusion: Instruction, compute: str,
                    wide: bool) -> tuple[dict[str, Section | None], int]:
    """The mask over a [BLOCK_M, BLOCK_N] score tile and the fused root over a [BLOCK_M, BLOCK_DV]
    output tile; a program's (batch..., head) is pid_b, row-major over q's leading dims."""
    q = inst.operands[0].shape
    rank = q.rank
    lead = Lanes("pid_b", tuple(range(rank - 2)), per_lane=False)
    sections: dict[str, Section | None] = {"mask_section": None, "epilogue": None}
    flops = 0
    if len(inst.operands) > 3:
        mask = inst.operands[3]
        scores = [int(n) for n in q.dims[:-1]] + [int(inst.operands[1].shape.dims[-2])]
        em = TileEmitter(fusion, "m_", "BLOCK_M, BLOCK_N", scores,
                         [lead, Lanes("lane_q", (rank - 2,)), Lanes("lane_k", (rank - 1,))], wide)
        em.section(mask, broadcast_coords(em.coords, mask.shape))
        (sections["mask_section"],) = em.sections()
        flops += em.ops * numel(scores)
    if fusion.called.root is not inst:
        sections["epilogue"], ops = epilogue(fusion, inst, "out", compute, [lead, Lanes("lane_q", (rank - 2,)),
                                                                             Lanes("lane_dv", (rank - 1,))],
                                             "BLOCK_M, BLOCK_DV", wide)
        flops += ops * inst.shape.numel()
    return sections, flops
