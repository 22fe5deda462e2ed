"""stablehlo.rng_bit_generator against the Random123 known-answer vectors (Salmon et al., SC 2011: the
Threefry-2x32 20-round and Philox-4x32 10-round tests of its kat_vectors), read through XLA's mapping of the
state to key and counter, and width-changing stablehlo.bitcast_convert against numpy's view."""

from __future__ import annotations

import numpy as np
import pytest
from shlo_programs import run_kernels

from mlcc.frontend.stablehlo import import_stablehlo
from mlcc.hlo.evaluator import evaluate
from mlcc.hlo.verifier import verify_module

TYPES = {np.dtype(np.uint8): "ui8", np.dtype(np.uint16): "ui16", np.dtype(np.uint32): "ui32",
         np.dtype(np.uint64): "ui64", np.dtype(np.int32): "i32", np.dtype(np.float32): "f32"}


def tensor(shape, dtype) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + TYPES[np.dtype(dtype)] + ">"


def rng_program(algorithm: str, n: int, shape, dtype, generic: bool = False) -> str:
    state, out = tensor((n,), np.uint64), tensor(shape, dtype)
    if generic:
        op = (f'%0:2 = "stablehlo.rng_bit_generator"(%arg0) <{{rng_algorithm = #stablehlo<rng_algorithm '
              f'{algorithm}>}}> : ({state}) -> ({state}, {out})\n    return %0#0, %0#1')
    else:
        op = (f"%s, %o = stablehlo.rng_bit_generator %arg0, algorithm = {algorithm} : ({state}) -> ({state}, {out})"
              "\n    return %s, %o")
    return (f"module @m {{\n  func.func public @main(%arg0: {state}) -> ({state}, {out}) {{\n    {op} : {state}, "
            f"{out}\n  }}\n}}\n")


def run(text: str, *args) -> list[np.ndarray]:
    module = import_stablehlo(text)
    verify_module(module)
    out = evaluate(module, {f"arg{i}": a for i, a in enumerate(args)})
    return [out[n] for n in module.output_names]


def u64(low: int, high: int) -> int:
    return (high << 32) | low


# Random123 kat_vectors: (counter words, key words) -> output words
THREEFRY_KAT = [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
                ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
                ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0))]
PHILOX_KAT = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
              ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
              ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
               (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]


@pytest.mark.parametrize("counter, key, want", THREEFRY_KAT)
def test_threefry_is_threefry2x32_of_the_counter(counter, key, want):
    # one u64 output: the 64-bit counter state[1] split low word first, the key state[0] likewise
    state = np.array([u64(*key), u64(*counter)], np.uint64)
    new_state, bits = run(rng_program("THREE_FRY", 2, (1,), np.uint64), state)
    assert [int(bits[0]) & 0xFFFFFFFF, int(bits[0]) >> 32] == list(want)
    assert int(new_state[0]) == int(state[0]) and int(new_state[1]) == (int(state[1]) + 1) % 2**64


@pytest.mark.parametrize("counter, key, want", PHILOX_KAT)
@pytest.mark.parametrize("generic", [False, True])
def test_philox_is_philox4x32_of_the_128_bit_counter(counter, key, want, generic):
    state = np.array([u64(*key), u64(*counter[:2]), u64(*counter[2:])], np.uint64)
    new_state, bits = run(rng_program("PHILOX", 3, (2,), np.uint64, generic), state)
    assert [int(bits[0]) & 0xFFFFFFFF, int(bits[0]) >> 32, int(bits[1]) & 0xFFFFFFFF, int(bits[1]) >> 32] == \
        list(want)
    count = (int(state[1]) + (int(state[2]) << 64) + 1) % 2**128  # one block of four words used
    assert [int(v) for v in new_state] == [int(state[0]), count & (2**64 - 1), count >> 64]


def test_philox_u32_words_in_order_and_a_two_word_state():
    # u64[2]: key state[0], counter (state[1], state[0]) low word first; 32-bit outputs take the words in order
    key, low = PHILOX_KAT[2][1], PHILOX_KAT[2][0][:2]
    state = np.array([u64(*key), u64(*low)], np.uint64)
    high = key  # the counter's high 64 bits are the key
    _, bits = run(rng_program("DEFAULT", 2, (3,), np.uint32), state)
    _, wide = run(rng_program("PHILOX", 3, (2,), np.uint64), np.array([u64(*key), u64(*low), u64(*high)], np.uint64))
    words = [int(wide[0]) & 0xFFFFFFFF, int(wide[0]) >> 32, int(wide[1]) & 0xFFFFFFFF]
    assert [int(b) for b in bits] == words


def test_threefry_u32_halves_and_narrow_outputs():
    # u32[4, 3]: the first even dim (4) cut in halves, u32[2, 1, 3] each, put side by side along the inserted dim:
    # the counter of half element (i, 0, c) gives word 0 to row 2i and word 1 to row 2i + 1, column c
    key, counter = THREEFRY_KAT[2][1], THREEFRY_KAT[2][0]
    state = np.array([u64(*key), u64(*counter) - 4], np.uint64)
    new_state, bits = run(rng_program("THREE_FRY", 2, (4, 3), np.uint32), state)
    assert (int(bits[2, 1]), int(bits[3, 1])) == THREEFRY_KAT[2][2]  # counter start + 4: i = 1, c = 1
    assert int(new_state[1]) == int(state[1]) + 6
    _, narrow = run(rng_program("THREE_FRY", 2, (4, 3), np.uint8), state)
    np.testing.assert_array_equal(narrow, (bits & 0xFF).astype(np.uint8))


def test_rng_bit_generator_through_kernels(tmp_path):
    state = np.array([u64(*PHILOX_KAT[2][1]), u64(*PHILOX_KAT[2][0][:2]), u64(*PHILOX_KAT[2][0][2:])], np.uint64)
    text = rng_program("PHILOX", 3, (5, 7), np.uint32)
    want = run(text, state)
    got = run_kernels(text, [state], tmp_path)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert [int(w) for w in got[1].reshape(-1)[:4]] == list(PHILOX_KAT[2][2])


# ---------------------------------------------------------------- bitcast_convert between widths
@pytest.mark.parametrize("src, dst, shape", [(np.uint32, np.uint64, (3, 2)), (np.uint64, np.uint32, (3,)),
                                             (np.float32, np.uint64, (2, 2)), (np.uint64, np.uint8, (2,))])
def test_bitcast_convert_between_widths_is_little_endian(src, dst, shape):
    size = int(np.prod(shape)) * np.dtype(src).itemsize
    x = np.random.default_rng(5).integers(1, 120, size, dtype=np.uint8).view(src).reshape(shape)
    if np.dtype(dst).itemsize < np.dtype(src).itemsize:  # a new last dim of the narrow elements
        want = x.reshape(shape + (1,)).view(dst)
    else:  # the last dim absorbed
        want = x.view(dst).reshape(shape[:-1])
    text = (f"module @m {{\n  func.func public @main(%arg0: {tensor(x.shape, src)}) -> {tensor(want.shape, dst)} {{\n"
            f"    %0 = stablehlo.bitcast_convert %arg0 : ({tensor(x.shape, src)}) -> {tensor(want.shape, dst)}\n"
            f"    return %0 : {tensor(want.shape, dst)}\n  }}\n}}\n")
    (got,) = run(text, x)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
