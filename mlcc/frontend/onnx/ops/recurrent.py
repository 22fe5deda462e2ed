"""RNN, GRU and LSTM, unrolled over the (static) sequence length: one dot for the input projection of every
step, then per step a dot with the recurrent weights and the gate math. sequence_lens masks the steps past
each batch entry's length (its state holds, its Y rows are 0), so a reverse pass starts at its last step."""

from __future__ import annotations

from typing import Callable

from mlcc.frontend.onnx.ops.helpers import broadcast_in_dims, full, require_float, scalar_op, static_dims
from mlcc.frontend.onnx.ops.shape_ops import slice_axis
from mlcc.frontend.onnx.registry import OnnxNode, Result, onnx_op
from mlcc.hlo.builder import Builder
from mlcc.hlo.ir import Instruction

MAX_UNROLLED_STEPS = 512
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
Activation = Callable[[Instruction], Instruction]


def _activation(b: Builder, node: OnnxNode, name: str, alpha: float | None, beta: float | None) -> Activation:
    if name == "Tanh":
        return lambda x: b.op("tanh", [x])
    if name == "Sigmoid":
        return lambda x: b.op("logistic", [x])
    if name == "Relu":
        return lambda x: b.op("relu", [x])
    if name == "HardSigmoid":
        a, c = 0.2 if alpha is None else alpha, 0.5 if beta is None else beta
        return lambda x: b.op("clamp", [b.splat(0, x.shape.dtype),
                                        scalar_op(b, "add", scalar_op(b, "multiply", x, a), c),
                                        b.splat(1, x.shape.dtype)])
    if name == "LeakyRelu":
        a = 0.01 if alpha is None else alpha
        return lambda x: b.op("maximum", [x, scalar_op(b, "multiply", x, a)]) if a <= 1 else \
            b.op("minimum", [x, scalar_op(b, "multiply", x, a)])
    if name == "Affine":
        a, c = 1.0 if alpha is None else alpha, 0.0 if beta is None else beta
        return lambda x: scalar_op(b, "add", scalar_op(b, "multiply", x, a), c)
    if name == "ScaledTanh":
        a, c = 1.0 if alpha is None else alpha, 1.0 if beta is None else beta
        return lambda x: scalar_op(b, "multiply", b.op("tanh", [scalar_op(b, "multiply", x, c)]), a)
    raise node.unsupported(f"activation '{name}'")


def _activations(b: Builder, node: OnnxNode, directions: int) -> list[list[Activation]]:
    """Per direction, the op's activation functions (f, g[, h])."""
    per = len(DEFAULT_ACTIVATIONS[node.op_type])
    names = node.attr("activations", DEFAULT_ACTIVATIONS[node.op_type] * directions)
    if len(names) != per * directions:
        raise node.error(f"{len(names)} activations for {directions} direction(s) of {per}")
    alphas, betas = node.attr("activation_alpha", []), node.attr("activation_beta", [])
    fns = [_activation(b, node, n, alphas[i] if i < len(alphas) else None, betas[i] if i < len(betas) else None)
           for i, n in enumerate(names)]
    return [fns[d * per:(d + 1) * per] for d in range(directions)]


class _Step:
    """What one direction needs at every step: weights, biases, activations, clip."""

    def __init__(self, b: Builder, node: OnnxNode, direction: int, hidden: int, acts: list[Activation]) -> None:
        self.b, self.node, self.hidden, self.acts = b, node, hidden, acts
        gates = GATES[node.op_type]
        pick = lambda i: b.reshape(slice_axis(b, node.input(i), 0, direction, direction + 1),  # noqa: E731
                                   node.dims(i)[1:])
        self.w, self.r = pick(1), pick(2)  # [G*H, I], [G*H, H]
        dtype = self.w.shape.dtype
        if node.has_input(3):
            bias = pick(3)
            self.wb, self.rb = slice_axis(b, bias, 0, 0, gates * hidden), slice_axis(b, bias, 0, gates * hidden,
                                                                                        2 * gates * hidden)
        else:
            self.wb = self.rb = full(b, 0, dtype, (gates * hidden,))
        self.peephole = pick(7) if node.op_type == "LSTM" and node.has_input(7) else None
        self.clip = node.attr("clip") if node.has_attr("clip") else None

    def gate(self, x: Instruction, g: int) -> Instruction:
        """Columns of gate g of a [batch, G*H] value."""
        return slice_axis(self.b, x, 1, g * self.hidden, (g + 1) * self.hidden)

    def vec(self, v: Instruction, g: int, batch) -> Instruction:
        return broadcast_in_dims(self.b, slice_axis(self.b, v, 0, g * self.hidden, (g + 1) * self.hidden),
                                 (batch, self.hidden), [1])

    def clipped(self, x: Instruction) -> Instruction:
        if self.clip is None:
            return x
        dtype = x.shape.dtype
        return self.b.op("clamp", [self.b.splat(-self.clip, dtype), x, self.b.splat(self.clip, dtype)])


def _dot_t(b: Builder, x: Instruction, w: Instruction) -> Instruction:
    """x @ w.T for x [..., K] and w [N, K]."""
    return b.op("dot", [x, w], lhs_batch_dims=(), lhs_contracting_dims=(x.shape.rank - 1,), rhs_batch_dims=(),
                rhs_contracting_dims=(1,))


def _cell(b: Builder, op: str, s: _Step, xw: Instruction, h: Instruction,
          c: Instruction | None) -> tuple[Instruction, Instruction | None]:
    """One step: (new h, new c) from the input projection xw [batch, G*H] (without biases) and the state."""
    batch = h.shape.dims[0]
    add = lambda *xs: _sum(b, xs)  # noqa: E731
    if op == "RNN":
        f, = s.acts
        return f(s.clipped(add(xw, _dot_t(b, h, s.r), s.vec(s.wb, 0, batch), s.vec(s.rb, 0, batch)))), None
    hr = _dot_t(b, h, s.r)
    if op == "GRU":
        f, g = s.acts
        z = f(s.clipped(add(s.gate(xw, 0), s.gate(hr, 0), s.vec(s.wb, 0, batch), s.vec(s.rb, 0, batch))))
        r = f(s.clipped(add(s.gate(xw, 1), s.gate(hr, 1), s.vec(s.wb, 1, batch), s.vec(s.rb, 1, batch))))
        if s.node.attr("linear_before_reset", 0):
            recurrent = b.op("multiply", [r, add(s.gate(hr, 2), s.vec(s.rb, 2, batch))])
        else:
            rh = slice_axis(b, s.r, 0, 2 * s.hidden, 3 * s.hidden)
            recurrent = add(_dot_t(b, b.op("multiply", [r, h]), rh), s.vec(s.rb, 2, batch))
        candidate = g(s.clipped(add(s.gate(xw, 2), recurrent, s.vec(s.wb, 2, batch))))
        one_minus_z = b.op("subtract", [full(b, 1, z.shape.dtype, z.shape.dims), z])
        return add(b.op("multiply", [one_minus_z, candidate]), b.op("multiply", [z, h])), None
    f, g, act_h = s.acts
    assert c is not None

    def pre(k: int) -> Instruction:  # gates in the order i, o, f, c
        return add(s.gate(xw, k), s.gate(hr, k), s.vec(s.wb, k, batch), s.vec(s.rb, k, batch))

    def peep(k: int, state: Instruction) -> Instruction | None:
        return b.op("multiply", [s.vec(s.peephole, k, batch), state]) if s.peephole is not None else None

    i = f(s.clipped(add(pre(0), peep(0, c))))
    forget = f(s.clipped(add(pre(2), peep(2, c))))
    candidate = g(s.clipped(pre(3)))
    c_new = add(b.op("multiply", [forget, c]), b.op("multiply", [i, candidate]))
    o = f(s.clipped(add(pre(1), peep(1, c_new))))
    return b.op("multiply", [o, act_h(c_new)]), c_new


def _sum(b: Builder, xs) -> Instruction:
    terms = [x for x in xs if x is not None]
    out = terms[0]
    for t in terms[1:]:
        out = b.op("add", [out, t])
    return out


def _initial(b: Builder, node: OnnxNode, i: int, direction: int, layout: int, dims, dtype) -> Instruction:
    if not node.has_input(i):
        return full(b, 0, dtype, dims)
    v = node.input(i)
    if layout:  # [batch, directions, hidden]
        return b.reshape(slice_axis(b, v, 1, direction, direction + 1), dims)
    return b.reshape(slice_axis(b, v, 0, direction, direction + 1), dims)


@onnx_op("RNN", since=7)
@onnx_op("RNN", since=14)
@onnx_op("GRU", since=7)
@onnx_op("GRU", since=14)
@onnx_op("LSTM", since=7)
@onnx_op("LSTM", since=14)
def import_recurrent(b: Builder, node: OnnxNode) -> list[Result]:
    op = node.op_type
    x = node.input(0)
    require_float(node, x)
    layout = node.attr("layout", 0)
    if layout:
        x = b.transpose(x, (1, 0, 2))
    seq, batch, _ = static_dims(node, x.shape.dims, "input dims")
    if seq > MAX_UNROLLED_STEPS:
        raise node.unsupported(f"sequences longer than {MAX_UNROLLED_STEPS} steps")
    if op == "LSTM" and node.attr("input_forget", 0):
        raise node.unsupported("input_forget=1")
    hidden = node.attr("hidden_size", None) or static_dims(node, node.dims(2)[2:], "hidden size")[0]
    direction = node.attr("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise node.error(f"unknown direction '{direction}'")
    directions = 2 if direction == "bidirectional" else 1
    acts = _activations(b, node, directions)
    dtype = x.shape.dtype
    state_dims = (batch, hidden)
    lens = None
    if node.has_input(4):
        lens = broadcast_in_dims(b, b.convert(node.input(4), "s64"), state_dims, [0])
    ys, hs, cs = [], [], []
    for d in range(directions):
        reverse = direction == "reverse" or d == 1
        s = _Step(b, node, d, hidden, acts[d])
        xw = _dot_t(b, x, s.w)  # [seq, batch, G*H]
        h = _initial(b, node, 5, d, layout, state_dims, dtype)
        c = _initial(b, node, 6, d, layout, state_dims, dtype) if op == "LSTM" else None
        outs: list[Instruction | None] = [None] * seq
        for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
            step_xw = b.reshape(slice_axis(b, xw, 0, t, t + 1), xw.shape.dims[1:])
            h_new, c_new = _cell(b, op, s, step_xw, h, c)
            if lens is not None:  # steps at or past a sequence's length leave its state alone and output 0
                valid = b.op("compare", [full(b, t, "s64", state_dims), lens], direction="LT")
                h_new = b.op("select", [valid, h_new, h])
                if c_new is not None:
                    c_new = b.op("select", [valid, c_new, c])
                outs[t] = b.op("select", [valid, h_new, full(b, 0, dtype, state_dims)])
            else:
                outs[t] = h_new
            h, c = h_new, c_new
        ys.append(b.op("concatenate", [b.reshape(o, (1, 1, batch, hidden)) for o in outs], dimension=0)
                  if seq > 1 else b.reshape(outs[0], (1, 1, batch, hidden)))
        hs.append(b.reshape(h, (1, batch, hidden)))
        if c is not None:
            cs.append(b.reshape(c, (1, batch, hidden)))
    y = ys[0] if directions == 1 else b.op("concatenate", ys, dimension=1)  # [seq, dirs, batch, H]
    y_h = hs[0] if directions == 1 else b.op("concatenate", hs, dimension=0)  # [dirs, batch, H]
    y_c = (cs[0] if directions == 1 else b.op("concatenate", cs, dimension=0)) if cs else None
    if layout:
        y = b.transpose(y, (2, 0, 1, 3))
        y_h = b.transpose(y_h, (1, 0, 2))
        y_c = b.transpose(y_c, (1, 0, 2)) if y_c is not None else None
    results: list[Result] = [y, y_h] + ([y_c] if op == "LSTM" else [])
    return results[:node.num_outputs]

