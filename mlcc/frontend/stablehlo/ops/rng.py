"""stablehlo.rng_bit_generator as XLA expands it (xla/service/rng_bit_generator_expander.cc over
xla/hlo/builder/lib/prng.cc): plain u32/u64 arithmetic, so the bits are exactly XLA's.

The state is u64[n]: its first element is the key. THREE_FRY (n = 2) counts from state[1]: element i of the
output (row-major) is Threefry-2x32 (20 rounds) of the 64-bit counter state[1] + i; for 32-bit outputs a
shape is first cut in halves along its first even dim (else its largest), each counter giving one output
word of each half, and the new state is state[1] plus the number of counters used. PHILOX counts in
128 bits, from state[1:3] (n >= 3) or (state[1], state[0]) (n = 2, the low word first): counter c + j gives
the four 32-bit words 4j..4j+3 of the output (Philox-4x32, 10 rounds); 64-bit outputs take two words each.
Narrower outputs keep the low bits of a 32-bit output. DEFAULT is PHILOX, as on XLA's CPU backend.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlcc.frontend.stablehlo.importer import Context, Results, stablehlo_op
from mlcc.frontend.stablehlo.syntax import Op
from mlcc.hlo.dtypes import numpy_dtype
from mlcc.hlo.ir import DTYPE_BITS, Instruction, Shape

ALGORITHMS = {"DEFAULT": "PHILOX", "THREE_FRY": "THREE_FRY", "PHILOX": "PHILOX"}
THREEFRY_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
PHILOX_W = (0x9E3779B9, 0xBB67AE85)
PHILOX_M = (0xD2511F53, 0xCD9E8D57)


class _Bits:
    """Unsigned integer arithmetic on instructions of one dims (scalars broadcast to them)."""

    def __init__(self, cx: Context) -> None:
        self.cx = cx

    def const(self, value: int, dtype: str, dims: tuple[int, ...] = ()) -> Instruction:
        return self.cx.b.constant(np.full(dims, value, dtype=numpy_dtype(dtype)))

    def op(self, opcode: str, x: Instruction, y: Instruction | int) -> Instruction:
        if isinstance(y, int):
            y = self.const(y, x.shape.dtype, tuple(x.shape.dims))
        return self.cx.b.op(opcode, [x, y])

    def convert(self, x: Instruction, dtype: str) -> Instruction:
        """Unsigned conversion: a narrower type keeps the low bits."""
        bits = DTYPE_BITS[dtype]
        if bits < DTYPE_BITS[x.shape.dtype]:
            x = self.op("and", x, (1 << bits) - 1)
        return self.cx.b.convert(x, dtype)

    def halves(self, x: Instruction) -> tuple[Instruction, Instruction]:
        """A u64's low and high 32 bits."""
        return self.convert(x, "u32"), self.convert(self.op("shift-right-logical", x, 32), "u32")

    def join(self, low: Instruction, high: Instruction) -> Instruction:
        return self.op("or", self.convert(low, "u64"), self.op("shift-left", self.convert(high, "u64"), 32))

    def rotate_left(self, x: Instruction, distance: int) -> Instruction:
        return self.op("or", self.op("shift-left", x, distance), self.op("shift-right-logical", x, 32 - distance))

    def scalar(self, state: Instruction, index: int) -> Instruction:
        return self.cx.b.reshape(self.cx.b.op("slice", [state], start_indices=(index,), limit_indices=(index + 1,),
                                              strides=(1,)), ())

    def broadcast(self, x: Instruction, dims: tuple[int, ...]) -> Instruction:
        return self.cx.b.broadcast_to(x, dims)


# ---------------------------------------------------------------- Threefry-2x32
def threefry2x32(bits: _Bits, x: list[Instruction], key: tuple[Instruction, Instruction]) -> list[Instruction]:
    dims = tuple(x[0].shape.dims)
    ks = [bits.broadcast(k, dims) for k in key]
    ks.append(bits.op("xor", bits.op("xor", ks[0], ks[1]), 0x1BD11BDA))
    x = [bits.op("add", x[0], ks[0]), bits.op("add", x[1], ks[1])]
    for block in range(5):
        for r in THREEFRY_ROTATIONS[4 * (block % 2): 4 * (block % 2) + 4]:
            x0 = bits.op("add", x[0], x[1])
            x = [x0, bits.op("xor", x0, bits.rotate_left(x[1], r))]
        x = [bits.op("add", x[0], ks[(block + 1) % 3]),
             bits.op("add", bits.op("add", x[1], ks[(block + 2) % 3]), block + 1)]
    return x


def _counters(bits: _Bits, start: Instruction, dims: tuple[int, ...]) -> Instruction:
    """u64 start + the row-major index of each element of dims."""
    counter = bits.broadcast(start, dims)
    stride = 1
    for i in reversed(range(len(dims))):
        if dims[i] < 2:
            continue
        iota = bits.cx.b.op("iota", [], Shape("u64", dims), iota_dimension=i)
        counter = bits.op("add", counter, bits.op("multiply", iota, stride))
        stride *= dims[i]
    return counter


def _split_in_halves(dims: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """(half dims, the dim split): the first even dim, else the largest, cut in two (rounded up), a dim of 1
    inserted after it for the halves to be concatenated along."""
    if not dims:
        return (1,), -1
    even = [i for i, d in enumerate(dims) if d % 2 == 0]
    split = even[0] if even else max(range(len(dims)), key=lambda i: (dims[i], -i))
    half = dims[:split] + (-(-dims[split] // 2), 1) + dims[split + 1:]
    return half, split


def threefry_bits(bits: _Bits, key: Instruction, start: Instruction, dims: tuple[int, ...],
                  width: int) -> tuple[Instruction, Instruction]:
    """(u32 or u64 output of dims, the state's new counter)."""
    cx = bits.cx
    key_words = bits.halves(key)
    if width == 64:
        out = threefry2x32(bits, list(bits.halves(_counters(bits, start, dims))), key_words)
        return bits.join(out[0], out[1]), bits.op("add", start, int(np.prod(dims, dtype=np.int64)))
    half, split = _split_in_halves(dims)
    out = threefry2x32(bits, list(bits.halves(_counters(bits, start, half))), key_words)
    new_counter = bits.op("add", start, int(np.prod(half, dtype=np.int64)))
    if split < 0:
        return cx.b.reshape(out[0], ()), new_counter
    joined = cx.b.op("concatenate", out, dimension=split + 1)
    even = dims[:split] + (2 * half[split],) + dims[split + 1:]
    result = cx.b.reshape(joined, even)
    if even != dims:
        result = cx.b.op("slice", [result], start_indices=(0,) * len(dims), limit_indices=dims,
                         strides=(1,) * len(dims))
    return result, new_counter


# ---------------------------------------------------------------- Philox-4x32
def philox4x32(bits: _Bits, x: list[Instruction], key: tuple[Instruction, Instruction]) -> list[Instruction]:
    dims = tuple(x[0].shape.dims)
    k = [bits.broadcast(w, dims) for w in key]
    for _ in range(10):
        lo0, hi0 = bits.halves(bits.op("multiply", bits.convert(x[0], "u64"), PHILOX_M[0]))
        lo1, hi1 = bits.halves(bits.op("multiply", bits.convert(x[2], "u64"), PHILOX_M[1]))
        x = [bits.op("xor", bits.op("xor", hi1, x[1]), k[0]), lo1, bits.op("xor", bits.op("xor", hi0, x[3]), k[1]), lo0]
        k = [bits.op("add", k[0], PHILOX_W[0]), bits.op("add", k[1], PHILOX_W[1])]
    return x


def _add_u128(bits: _Bits, low: Instruction, high: Instruction, n: Instruction) -> tuple[Instruction, Instruction]:
    dims = tuple(n.shape.dims)
    low, high = bits.broadcast(low, dims), bits.broadcast(high, dims)
    new_low = bits.op("add", low, n)
    carry = bits.cx.b.op("compare", [new_low, low], direction="LT")
    return new_low, bits.cx.b.op("select", [carry, bits.op("add", high, 1), high])


def philox_bits(bits: _Bits, key: Instruction, counter: tuple[Instruction, Instruction], dims: tuple[int, ...],
                width: int) -> tuple[Instruction, tuple[Instruction, Instruction]]:
    """(u32 or u64 output of dims, the new 128-bit counter as (low, high) u64 scalars)."""
    cx = bits.cx
    count = int(np.prod(dims, dtype=np.int64))
    words = count * (width // 32)
    blocks = -(-words // 4)
    iota = cx.b.op("iota", [], Shape("u64", (blocks,)), iota_dimension=0)
    low, high = _add_u128(bits, counter[0], counter[1], iota)
    out = philox4x32(bits, [*bits.halves(low), *bits.halves(high)], bits.halves(key))
    new_counter = _add_u128(bits, counter[0], counter[1], bits.const(blocks, "u64"))
    lanes = out if width == 32 else [bits.join(out[0], out[1]), bits.join(out[2], out[3])]
    interleaved = cx.b.op("concatenate", [cx.b.reshape(w, (blocks, 1)) for w in lanes], dimension=1)
    flat = cx.b.reshape(interleaved, (blocks * len(lanes),))
    if blocks * len(lanes) != count:
        flat = cx.b.op("slice", [flat], start_indices=(0,), limit_indices=(count,), strides=(1,))
    return cx.b.reshape(flat, dims), new_counter


# ---------------------------------------------------------------- the op
@stablehlo_op("stablehlo.rng_bit_generator")
def import_rng_bit_generator(cx: Context, op: Op, args: list[Any]) -> Results:
    (state,) = args
    algorithm = str(op.attrs.get("rng_algorithm", "DEFAULT")).split()[-1].strip(">")
    if algorithm not in ALGORITHMS:
        raise cx.error(op, f"unknown rng_algorithm {algorithm}")
    algorithm = ALGORITHMS[algorithm]
    out = cx.result_shape(op, 1)
    dims = tuple(int(d) for d in out.dims)
    n = int(state.shape.dims[0]) if state.shape.rank == 1 else 0
    if state.shape.dtype != "u64" or n < 2:
        raise cx.unsupported(op, f"a state of {state.shape} (u64[2], or u64[3] for PHILOX)")
    if algorithm == "THREE_FRY" and n != 2:
        raise cx.unsupported(op, "a THREE_FRY state of other than 2 elements")
    width = DTYPE_BITS.get(out.dtype, 0)
    if width not in (8, 16, 32, 64) or out.dtype == "pred":
        raise cx.unsupported(op, f"outputs of element type {out.dtype}")
    bits = _Bits(cx)
    key = bits.scalar(state, 0)
    if algorithm == "THREE_FRY":
        value, counter = threefry_bits(bits, key, bits.scalar(state, 1), dims, max(width, 32))
        new_state = [key, counter]
    else:
        start = (bits.scalar(state, 1), bits.scalar(state, 2)) if n >= 3 else (bits.scalar(state, 1), key)
        value, (low, high) = philox_bits(bits, key, start, dims, max(width, 32))
        new_state = [key, low, high] if n >= 3 else [key, low]
    new_state += [bits.scalar(state, i) for i in range(len(new_state), n)]
    unsigned = f"u{width}"
    if width < 32:
        value = bits.convert(value, unsigned)
    if out.dtype != value.shape.dtype:
        value = cx.b.op("bitcast-convert", [value], Shape(out.dtype, dims))
    state_out = cx.b.op("concatenate", [cx.b.reshape(s, (1,)) for s in new_state], dimension=0)
    return [state_out, value]
