"""THE pipeline, from an imported module to the bundle, in the order it runs.

    simplify -> recognize -> precision -> layouts -> fusion -> schedule -> buffers
    then the compiler's steps (mlcc/compiler.py): lower -> binaries -> bundle

Each phase names the module properties it requires and the ones it guarantees
(mlcc.hlo.ir.Property); the pass manager records the guarantees on the module
when the phase ends, and the verifier checks more as they accumulate. A module
read back from text (a bundle's model.hlo) starts past the phases its header
shows were done. ``--disable-pass`` takes any pass named here, except one a
phase's guarantees rest on while a later phase or step requires them.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlcc.emit.codegen.lower_module import fusion_kinds
from mlcc.emit.matmul_tiles import dense_split_k_slices, split_k_slices
from mlcc.errors import UnsupportedError
from mlcc.hlo.ir import Property
from mlcc.hlo.passes.attention_layer import AttentionLayerFusion
from mlcc.hlo.passes.b2b_fusion import B2bFusion
from mlcc.hlo.passes.batchnorm_folding import BatchNormFolding
from mlcc.hlo.passes.dce import DeadCodeElimination
from mlcc.hlo.passes.fusion import Fusion
from mlcc.hlo.passes.kv_cache import KvCacheAnalysis
from mlcc.hlo.passes.layout_assignment import LayoutAssignment, TransposeToBitcast
from mlcc.hlo.passes.multi_output import MultiOutputFusion
from mlcc.hlo.passes.norm_statistics import NormStatistics
from mlcc.hlo.passes.qkv_attention import QkvAttentionFusion
from mlcc.hlo.passes.dynamic_quant import SinkDynamicScale
from mlcc.hlo.passes.packed_arena import PackArenaValues
from mlcc.hlo.passes.pass_manager import FixedPoint, Pass, Phase, Pipeline
from mlcc.hlo.passes.pipelines import cleanup, legalize, recognition
from mlcc.hlo.passes.precision import ReducedPrecision
from mlcc.hlo.passes.quantize_weights import QuantizeWeights, is_static_int8, parse_scheme
from mlcc.hlo.passes.quantized_dot import FoldFakeQuant, QuantizedContraction
from mlcc.hlo.passes.quantized_fp8 import Fp8Contraction
from mlcc.hlo.passes.reshape_to_bitcast import ReshapeToBitcast
from mlcc.hlo.passes.schedule import BufferAssignment, Schedule
from mlcc.hlo.passes.sibling_dots import MergeSiblingDots
from mlcc.hlo.passes.sink_bitcasts import SinkBitcasts
from mlcc.hlo.passes.split_k import SplitK

LAYOUTS, FUSED, SCHEDULED, BUFFERS = (Property.LAYOUTS_ASSIGNED, Property.FUSED, Property.SCHEDULED,
                                      Property.BUFFERS_ASSIGNED)


@dataclass(frozen=True)
class Step:
    """A step of the compiler after the phases (mlcc/compiler.py), and the properties it requires."""

    name: str
    requires: frozenset[Property]


# What the compiler does with the module once the phases are done.
STEPS = (
    Step("lowering", frozenset({LAYOUTS, FUSED, SCHEDULED, BUFFERS})),  # a kernel per launch (mlcc/emit)
    Step("binaries", frozenset()),                                     # AOT compilation per target
    Step("bundle", frozenset({BUFFERS})),                              # manifest, weights.bin, model.hlo
)


def phases(precision: str = "fp32", io_layout: str = "row-major", quantize: str | None = None) -> list[Phase]:
    """The phases in order, configured by the compile options that change what they do. ``quantize`` is a
    checked --quantize scheme (compiler._checked_options): its pass runs first, on the imported weights (int8
    has none: the model was rewritten to QDQ before import)."""
    first: list[Pass] = []
    if quantize and not is_static_int8(quantize):
        block = parse_scheme(quantize)
        if block is None:
            raise UnsupportedError(f"unknown --quantize scheme '{quantize}'")
        first.append(QuantizeWeights(block))
    # fp8 contractions sum the unscaled fp8 products (up to 448**2 each, 57344**2 for e5m2) and scale after: a
    # half type, which --precision fp16|bf16 gives every f32 value, would overflow there. Those builds keep the
    # dequantized dots.
    fp8 = [Fp8Contraction()] if precision in ("fp32", "tf32") else []
    return [
        # before cleanup folds dequantized weights into float constants
        Phase("simplify", [*first, QuantizedContraction(), *fp8, FoldFakeQuant(), cleanup(), BatchNormFolding()]),
        Phase("recognize", [*recognition(), cleanup(), SinkDynamicScale(), *legalize(), MergeSiblingDots(), DeadCodeElimination()]),
        # then decode-sized dots computing their weight in the K loop are split over K when the tiles say so,
        # in the types precision chose and before layouts are assigned to the slices
        Phase("precision", [ReducedPrecision(precision), SplitK(split_k_slices, dense_split_k_slices)]),
        Phase("layouts", [KvCacheAnalysis(), LayoutAssignment(io_layout), TransposeToBitcast(), ReshapeToBitcast(),
                          SinkBitcasts(), DeadCodeElimination()],
              guarantees=frozenset({LAYOUTS}), essential=frozenset({"layout-assignment"})),
        # Fusion is an optimization: with it disabled every op is its own kernel, and the decisions are still final.
        Phase("fusion", [Fusion(fusion_kinds()), MultiOutputFusion(fusion_kinds()), B2bFusion(fusion_kinds()),
                          QkvAttentionFusion(fusion_kinds()), AttentionLayerFusion(fusion_kinds()),
                          NormStatistics(fusion_kinds()),
                          PackArenaValues(), DeadCodeElimination()], requires=frozenset({LAYOUTS}),
              guarantees=frozenset({FUSED})),
        Phase("schedule", [Schedule()], requires=frozenset({LAYOUTS, FUSED}), guarantees=frozenset({SCHEDULED}),
              essential=frozenset({"schedule"})),
        Phase("buffers", [BufferAssignment()], requires=frozenset({SCHEDULED}), guarantees=frozenset({BUFFERS}),
              essential=frozenset({"buffer-assignment"})),
    ]


def compile_pipeline(precision: str = "fp32", io_layout: str = "row-major", quantize: str | None = None) -> Pipeline:
    return Pipeline("compile", phases(precision, io_layout, quantize))


def pass_names(pipeline: Pipeline) -> list[str]:
    """The names --disable-pass accepts: every pass in pipeline, once, in order."""
    names: list[str] = []

    def walk(passes: list[Pass]) -> None:
        for p in passes:
            if isinstance(p, (Phase, FixedPoint)):
                walk(p.passes)
            elif p.name not in names:
                names.append(p.name)
    walk(pipeline.passes)
    return names


def check_disabled(pipeline: Pipeline, disabled: list[str]) -> None:
    """UnsupportedError (one line) for an unknown pass, or one a later phase or step cannot do without."""
    names = pass_names(pipeline)
    unknown = sorted(set(disabled) - set(names))
    if unknown:
        raise UnsupportedError(f"unknown pass {', '.join(unknown)} (passes: {', '.join(names)})")
    stages = [p for p in pipeline.passes if isinstance(p, Phase)]
    for i, phase in enumerate(stages):
        for name in sorted(phase.essential & set(disabled)):
            later = [(f"{s.name} phase", s.requires) for s in stages[i + 1:]] + [(f"{s.name} step", s.requires)
                                                                                 for s in STEPS]
            for stage, requires in later:
                needed = [q.value for q in Property if q in requires & phase.guarantees]
                if needed:
                    raise UnsupportedError(f"cannot disable pass {name}: the {stage} requires "
                                           f"{', '.join(needed)}, which it establishes")


def named_passes(names: list[str], precision: str = "fp32", io_layout: str = "row-major") -> list[Pass]:
    """The passes or phases of the pipeline with these names, in the order given (mlcc opt --passes);
    UnsupportedError naming the ones that are neither."""
    known: dict[str, Pass] = {}

    def walk(passes: list[Pass]) -> None:
        for p in passes:
            if isinstance(p, Phase):
                known.setdefault(p.name, p)
            if isinstance(p, (Phase, FixedPoint)):
                walk(p.passes)
            else:
                known.setdefault(p.name, p)
    walk(compile_pipeline(precision, io_layout).passes)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UnsupportedError(f"unknown pass {', '.join(unknown)} (passes: {', '.join(sorted(known))})")
    return [known[n] for n in names]
