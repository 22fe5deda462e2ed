"""Symbolic sizes in code generation: the symbols' ranges reach a lowering as an argument, and a Sym
prints as IR text everywhere; kernel source text gets the expression over the ``sym_`` arguments only
where a template prints a size (or asks with ``|code``)."""

from __future__ import annotations

import re

import pytest

from mlcc.emit.codegen.kernel import _env, lower
from mlcc.emit.codegen.lower_module import tilings
from mlcc.emit.target.targets import parse_target
from mlcc.hlo.parser import parse_module
from mlcc.hlo.symbolic import SymbolicError, parse

CASES = {
    "softmax": "  %x = f32[seq,256]{1,0} parameter(0)\n  ROOT %y = f32[seq,256]{1,0} softmax(%x), dimension=1",
    "reduce": "  %x = f32[seq,512]{1,0} parameter(0)\n  ROOT %y = f32[seq]{0} reduce(%x), dimensions={1}, kind=add",
    "dot": ("  %a = f32[seq,64]{1,0} parameter(0)\n  %b = f32[64,128]{1,0} parameter(1)\n"
            "  ROOT %y = f32[seq,128]{1,0} dot(%a, %b), lhs_batch_dims={}, lhs_contracting_dims={1}, "
            "rhs_batch_dims={}, rhs_contracting_dims={0}"),
    "add": "  %a = f32[seq,96]{1,0} parameter(0)\n  ROOT %y = f32[seq,96]{1,0} add(%a, %a)",
}

# kernels whose templates print a symbolic size in an expression (argreduce's "~ (size|code) ~"), and others
SOURCE_CASES = {
    **CASES,
    "argmax": "  %x = f32[4,seq]{1,0} parameter(0)\n  ROOT %y = s64[4]{0} argmax(%x), dimension=1",
    "cumsum": ("  %x = f32[4,seq]{1,0} parameter(0)\n"
               "  ROOT %y = f32[4,seq]{1,0} cumsum(%x), dimension=1, exclusive=false, reverse=false"),
    "layer-norm": ("  %x = f32[seq,64]{1,0} parameter(0)\n  %s = f32[64]{0} parameter(1)\n"
                   "  %b = f32[64]{0} parameter(2)\n"
                   "  ROOT %y = f32[seq,64]{1,0} layer-norm(%x, %s, %b), dimensions={1}, epsilon=1e-5"),
    "reduce-window": ("  %x = f32[1,2,seq,8]{3,2,1,0} parameter(0)\n"
                      "  ROOT %y = f32[1,2,seq,4]{3,2,1,0} reduce-window(%x), window_dimensions={1,1,1,2}, "
                      "window_strides={1,1,1,2}, padding_low={0,0,0,0}, padding_high={0,0,0,0}, kind=maximum"),
}

# (case, seq's upper end) -> (gpu constexprs, interpreter constexprs, flops): what the lowerings chose when
# the ranges were a contextvar entered around them (main before this change), recorded from it.
BEFORE = {
    ("softmax", 64): ({"BLOCK_C": 256, "BLOCK_ROWS": 8}, {"BLOCK_C": 256, "BLOCK_ROWS": 64}, 81920),
    ("softmax", 4096): ({"BLOCK_C": 256, "BLOCK_ROWS": 8}, {"BLOCK_C": 256, "BLOCK_ROWS": 256}, 5242880),
    ("reduce", 64): ({"BLOCK_O": 8, "BLOCK_R": 512}, {"BLOCK_O": 64, "BLOCK_R": 512}, 32704),
    ("reduce", 4096): ({"BLOCK_O": 8, "BLOCK_R": 512}, {"BLOCK_O": 128, "BLOCK_R": 512}, 2093056),
    ("dot", 64): ({"BLOCK_K": 32, "BLOCK_M": 64, "BLOCK_N": 64, "GROUP_M": 8},
                  {"BLOCK_K": 64, "BLOCK_M": 64, "BLOCK_N": 128, "GROUP_M": 8}, 1048576),
    ("dot", 4096): ({"BLOCK_K": 32, "BLOCK_M": 64, "BLOCK_N": 64, "GROUP_M": 8},
                    {"BLOCK_K": 64, "BLOCK_M": 2048, "BLOCK_N": 128, "GROUP_M": 8}, 67108864),
    ("add", 64): ({"BLOCK": 1024}, {"BLOCK": 8192}, 6144),
    ("add", 4096): ({"BLOCK": 1024}, {"BLOCK": 65536}, 393216),
}


def module_of(case: str, hi: int):
    return parse_module(f"HloModule m, symbols={{seq={{1,{hi}}}}}\n\nENTRY %main {{\n{SOURCE_CASES[case]}\n}}\n")


@pytest.mark.parametrize("case,hi", sorted(BEFORE))
def test_a_lowering_given_the_ranges_picks_the_tiles_it_picked_before(case, hi):
    module = module_of(case, hi)
    kernel = lower(module.entry.root, "k", module.symbols)
    gpu, interpreter, flops = BEFORE[case, hi]
    assert (kernel.gpu.constexprs, kernel.interpreter.constexprs, kernel.flops) == (gpu, interpreter, flops)
    assert all(isinstance(g, str) and "seq" in g for g in kernel.gpu.grid[:1])  # the grid the runtime evaluates


def test_the_ranges_are_read_from_the_argument_only():
    module = module_of("add", 64)
    with pytest.raises(SymbolicError, match="no range for 'seq'"):
        lower(module.entry.root, "k")  # no ranges given: a symbolic size cannot be bounded
    wider = lower(module.entry.root, "k", {"seq": (1, 4096)})
    assert wider.interpreter.constexprs == BEFORE["add", 4096][1]


@pytest.mark.parametrize("case,target,config", [
    ("softmax", "gfx942", ({"BLOCK_C": 256, "BLOCK_ROWS": 8}, 2)),
    ("reduce", "gfx942", ({"BLOCK_O": 8, "BLOCK_R": 512}, 4)),
])
def test_a_row_kernels_target_heuristic_reads_the_ranges_its_problem_carries(case, target, config):
    module = module_of(case, 4096)
    kernel = lower(module.entry.root, "k", module.symbols)
    chosen = tilings()[kernel.template].heuristic(kernel.extra["problem"], parse_target(target))
    assert (chosen.constexprs, chosen.num_warps) == config
    assert chosen.grid[0] == "max(1, cdiv(seq, 8))"


def test_str_of_a_size_is_the_ir_text_inside_and_outside_code_generation():
    size = parse("4*seq*seq+seq")
    outside = str(size)
    rendered = _env().from_string("{{ n }} | {{ (n|code) ~ '!' }} | {{ text(n) }} | {{ 3|code }}").render(
        n=size, text=str)
    assert rendered == "(4*sym_seq*sym_seq + sym_seq) | (4*sym_seq*sym_seq + sym_seq)! | 4*seq*seq+seq | 3"
    assert str(size) == f"{size}" == outside == "4*seq*seq+seq"


def test_a_symbolic_kernel_computes_its_sizes_from_its_sym_arguments():
    for case in SOURCE_CASES:
        module = module_of(case, 64)
        kernel = lower(module.entry.root, "k", module.symbols)
        assert "sym_seq" in kernel.source and kernel.scalars == ["seq"], case
        assert re.search(r"\bseq\b", kernel.source) is None, case  # never the IR text, a name Triton lacks
