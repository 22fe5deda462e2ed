"""The optimizer update rules of ai.onnx.preview.training (Adagrad, Adam, Momentum): elementwise
formulas over each (X, G, state...) group, with the learning rate R and the iteration count T given
at run time as scalars (their formulas as the ONNX reference writes them)."""

from __future__ import annotations

from typing import Callable

from mlcc.frontend.onnx.ops.helpers import require_float, scalar_op
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.hlo.ir import Instruction

TRAINING = "ai.onnx.preview.training"


class _Update:
    """Arithmetic on one tensor group's dims, with R and T broadcast to them."""

    def __init__(self, b: Builder, node: OnnxNode, x: Instruction) -> None:
        self.b, self.dims, self.dtype = b, x.shape.dims, x.shape.dtype
        for i, what in ((0, "R"), (1, "T")):
            if node.rank(i) != 0 and any(d != 1 for d in node.dims(i)):
                raise node.error(f"{what} must be a scalar, has dims {list(node.dims(i))}")
        self.r = self.spread(node.input(0))
        self.t = self.spread(node.input(1))

    def spread(self, v: Instruction) -> Instruction:
        v = self.b.reshape(self.b.convert(v, self.dtype), ())
        return self.b.broadcast_to(v, self.dims)

    def __call__(self, opcode: str, x: Instruction, y: Instruction | float) -> Instruction:
        if isinstance(y, Instruction):
            return self.b.op(opcode, [x, y])
        return scalar_op(self.b, opcode, x, y)

    def started(self) -> Instruction:
        """T > 0, elementwise."""
        return scalar_op(self.b, "compare", self.t, 0.0, direction="GT")

    def regularized(self, x: Instruction, g: Instruction, norm: float) -> Instruction:
        return self("add", self("multiply", x, norm), g) if norm else g


def _groups(b: Builder, node: OnnxNode, states: int,
            rule: Callable[[_Update, list[Instruction]], list[Instruction]]) -> list[Result]:
    """Inputs R, T, X1..Xn, G1..Gn, then ``states`` more runs of n; outputs each run of n new values."""
    n, extra = divmod(node.num_inputs - 2, 2 + states)
    if n < 1 or extra:
        raise node.error(f"{node.num_inputs} inputs are not R, T and {2 + states} runs of equal length")
    if node.num_outputs != (1 + states) * n:
        raise node.error(f"{node.num_outputs} outputs for {n} tensors with {states} states each")
    results: list[list[Instruction]] = [[] for _ in range(1 + states)]
    for i in range(n):
        group = [node.input(2 + k * n + i) for k in range(2 + states)]
        for v in group:
            require_float(node, v)
            if v.shape.dims != group[0].shape.dims:
                raise node.error(f"tensor {i}'s inputs differ in dims: {[list(t.shape.dims) for t in group]}")
        for out, value in zip(results, rule(_Update(b, node, group[0]), group)):
            out.append(value)
    return [v for run in results for v in run]


@onnx_op("Adagrad", since=1, domain=TRAINING)
def import_adagrad(b: Builder, node: OnnxNode) -> list[Result]:
    decay, epsilon = float(node.attr("decay_factor", 0.0)), float(node.attr("epsilon", 1e-6))
    norm = float(node.attr("norm_coefficient", 0.0))

    def rule(u: _Update, group: list[Instruction]) -> list[Instruction]:
        x, g, h = group
        rate = u("divide", u.r, u("add", u("multiply", u.t, decay), 1.0))
        g = u.regularized(x, g, norm)
        h_new = u("add", h, u("multiply", g, g))
        scale = u("add", b.op("sqrt", [h_new]), epsilon)
        return [u("subtract", x, u("divide", u("multiply", rate, g), scale)), h_new]
    return _groups(b, node, 1, rule)


@onnx_op("Adam", since=1, domain=TRAINING)
def import_adam(b: Builder, node: OnnxNode) -> list[Result]:
    alpha, beta = float(node.attr("alpha", 0.9)), float(node.attr("beta", 0.999))
    epsilon, norm = float(node.attr("epsilon", 1e-6)), float(node.attr("norm_coefficient", 0.0))
    post = float(node.attr("norm_coefficient_post", 0.0))

    def rule(u: _Update, group: list[Instruction]) -> list[Instruction]:
        x, g, v, h = group
        g = u.regularized(x, g, norm)
        v_new = u("add", u("multiply", v, alpha), u("multiply", g, 1 - alpha))
        h_new = u("add", u("multiply", h, beta), u("multiply", u("multiply", g, g), 1 - beta))
        scale = u("add", b.op("sqrt", [h_new]), epsilon)
        power = lambda base: u("power", full_like(u, base), u.t)  # noqa: E731
        corrected = u("divide", u("multiply", u.r, b.op("sqrt", [u("subtract", full_like(u, 1.0), power(beta))])),
                      u("subtract", full_like(u, 1.0), power(alpha)))
        rate = b.op("select", [u.started(), corrected, u.r])
        x_new = u("subtract", x, u("multiply", rate, u("divide", v_new, scale)))
        return [u("multiply", x_new, 1 - post) if post else x_new, v_new, h_new]
    return _groups(b, node, 2, rule)


@onnx_op("Momentum", since=1, domain=TRAINING)
def import_momentum(b: Builder, node: OnnxNode) -> list[Result]:
    alpha, beta = float(node.attr("alpha")), float(node.attr("beta"))
    norm, mode = float(node.attr("norm_coefficient")), node.attr("mode")
    if mode not in ("standard", "nesterov"):
        raise node.error(f"unknown mode '{mode}'")

    def rule(u: _Update, group: list[Instruction]) -> list[Instruction]:
        x, g, v = group
        g = u.regularized(x, g, norm)
        first_beta = b.op("select", [u.started(), full_like(u, beta), full_like(u, 1.0)])
        v_new = u("add", u("multiply", v, alpha), u("multiply", first_beta, g))
        step = v_new if mode == "standard" else u("add", g, u("multiply", v_new, alpha))
        return [u("subtract", x, u("multiply", u.r, step)), v_new]
    return _groups(b, node, 1, rule)


def full_like(u: _Update, value: float) -> Instruction:
    return u.b.splat(value, u.dtype, tuple(u.dims))
