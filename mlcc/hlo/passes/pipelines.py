"""The optimization passes, in order: simplify, fold batch norms, recognize the ops the
author wrote, simplify again, legalize. The whole compile pipeline, with the backend's
phases after these, is mlcc/pipeline.py."""

from __future__ import annotations

from mlcc.hlo.passes.algsimp import AlgebraicSimplifier
from mlcc.hlo.passes.batchnorm_folding import BatchNormFolding
from mlcc.hlo.passes.constant_folding import ConstantFolding
from mlcc.hlo.passes.cse import CommonSubexpressionElimination
from mlcc.hlo.passes.dce import DeadCodeElimination
from mlcc.hlo.passes.output_copies import OutputCopies
from mlcc.hlo.passes.pass_manager import FixedPoint, Pass, Pipeline
from mlcc.hlo.passes.recognize.quant_attention import RecognizeQuantizedAttention
from mlcc.hlo.passes.recognize.gelu import RecognizeGelu
from mlcc.hlo.passes.recognize.layer_norm import RecognizeLayerNorm
from mlcc.hlo.passes.recognize.pooling import RecognizePooling
from mlcc.hlo.passes.recognize.silu import RecognizeSilu
from mlcc.hlo.passes.recognize.softmax import RecognizeSoftmax
from mlcc.hlo.passes.reshape_to_bitcast import ReshapeToBitcast
from mlcc.hlo.passes.splat_to_broadcast import SplatToBroadcast


def cleanup() -> FixedPoint:
    return FixedPoint("cleanup", [DeadCodeElimination(), CommonSubexpressionElimination(), ConstantFolding(),
                                  AlgebraicSimplifier()])


def recognition() -> list[Pass]:
    """Composites in dependency order: attention needs the softmax recognized first."""
    return [RecognizeLayerNorm(), RecognizeGelu(), RecognizeSilu(), RecognizeSoftmax(), RecognizeQuantizedAttention(),
            RecognizePooling()]


def legalize() -> list[Pass]:
    """Into the forms the backend's passes expect: splats as broadcasts, reshapes as bitcasts, an own
    buffer for every output."""
    return [SplatToBroadcast(), ReshapeToBitcast(), OutputCopies(), DeadCodeElimination()]


def default_pipeline() -> Pipeline:
    return Pipeline("optimize", [
        cleanup(),
        BatchNormFolding(),
        *recognition(),
        cleanup(),
        *legalize(),
    ])

