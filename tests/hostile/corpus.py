"""Hostile and broken inputs for mlcc, each BUILT at test time (onnx.helper or raw bytes): nothing binary is
checked in. One entry per item of /work/shared/RELIABILITY.md that an input file can exercise.

A bad case writes its files into a fresh folder laid out as::

    root/outside/secret        a sentinel the compile must never open (item 1-5: reads outside the model folder)
    root/outside/dir/          a folder outside, for symlinked parents
    root/model/                the model's folder: the case writes model.onnx (and its data) here

and says what mlcc must answer: the exit code (mlcc/errors.py) and a regex the one-line error must match.
Legal-but-nasty models (names built to break generated Python) are in ``nasty_name_model``.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 10  # what onnxruntime 1.2x reads (helper.make_model would write the newest)
INVALID, MISSING, UNSUPPORTED = 65, 66, 69


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def model_dir(self) -> Path:
        return self.root / "model"

    @property
    def model(self) -> Path:
        return self.model_dir / "model.onnx"

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    @property
    def secret(self) -> Path:
        return self.outside / "secret"


@dataclass(frozen=True)
class BadCase:
    name: str
    items: str              # RELIABILITY.md item numbers
    exit_code: int | tuple[int, ...]
    message: str            # regex the one-line error must match (after "mlcc: error: ")
    build: Callable[[Layout], Path]
    slow: bool = False
    timeout: float = 60.0


CASES: dict[str, BadCase] = {}


def case(name: str, items: str, exit_code: int | tuple[int, ...], message: str, *, slow: bool = False,
         timeout: float = 60.0) -> Callable[[Callable[[Layout], Path]], Callable[[Layout], Path]]:
    def register(fn: Callable[[Layout], Path]) -> Callable[[Layout], Path]:
        assert name not in CASES, name
        CASES[name] = BadCase(name, items, exit_code, message, fn, slow, timeout)
        return fn
    return register


def make_layout(root: Path) -> Layout:
    lay = Layout(root)
    lay.model_dir.mkdir(parents=True)
    (lay.outside / "dir").mkdir(parents=True)
    lay.secret.write_bytes(np.arange(64, dtype=np.float32).tobytes())
    (lay.outside / "dir" / "w.bin").write_bytes(np.arange(64, dtype=np.float32).tobytes())
    return lay


# ---- small model builders -------------------------------------------------------------------------------

def vi(name: str, dims: list, elem: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, dims)


def model_of(nodes, inputs, outputs, initializers=(), opset: int = OPSET, functions=(), **kw) -> onnx.ModelProto:
    graph = helper.make_graph(list(nodes), kw.pop("graph_name", "g"), list(inputs), list(outputs),
                              list(initializers))
    return helper.make_model(graph, opset_imports=kw.pop("opsets", [helper.make_opsetid("", opset)]),
                             functions=list(functions), ir_version=kw.pop("ir_version", IR_VERSION), **kw)


def good_model() -> onnx.ModelProto:
    """A small valid model: y = relu(x @ w + b)."""
    w = numpy_helper.from_array(np.linspace(-1, 1, 4 * 8, dtype=np.float32).reshape(4, 8), "w")
    b = numpy_helper.from_array(np.linspace(0, 1, 8, dtype=np.float32), "b")
    return model_of([helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["s"]),
                     helper.make_node("Relu", ["s"], ["y"])], [vi("x", [2, 4])], [vi("y", [2, 8])], [w, b])


def save(lay: Layout, model: onnx.ModelProto) -> Path:
    lay.model.write_bytes(model.SerializeToString())
    return lay.model


def external_model(lay: Layout, location: str, *, offset: str | None = "0", length: str | None = "128",
                   extra: tuple[tuple[str, str], ...] = ()) -> Path:
    """good_model() with w (4x8 f32, 128 bytes) stored externally at ``location``."""
    model = good_model()
    t = model.graph.initializer[0]
    t.ClearField("raw_data")
    t.ClearField("float_data")
    t.data_location = TensorProto.EXTERNAL
    entries = [("location", location)]
    entries += [("offset", offset)] if offset is not None else []
    entries += [("length", length)] if length is not None else []
    for key, value in entries + list(extra):
        e = t.external_data.add()
        e.key, e.value = key, value
    return save(lay, model)


def weights_bytes() -> bytes:
    return np.linspace(-1, 1, 32, dtype=np.float32).tobytes()


# ---- external data and the file system (items 1-10) ----------------------------------------------------

@case("ext_dotdot_etc_passwd", "1", INVALID, r"model\.onnx: .*'w'.*leaves the model's folder")
def _(lay: Layout) -> Path:
    return external_model(lay, "../../../etc/passwd")


@case("ext_dotdot_to_sentinel", "1", INVALID, r"model\.onnx: .*leaves the model's folder")
def _(lay: Layout) -> Path:
    return external_model(lay, "../outside/secret")


@case("ext_junk_dotdot", "2", INVALID, r"model\.onnx: .*leaves the model's folder")
def _(lay: Layout) -> Path:
    (lay.model_dir / "junk").mkdir()
    return external_model(lay, "junk/../../outside/secret")


@case("ext_backslash_dotdot", "2", INVALID, r"model\.onnx: .*leaves the model's folder")
def _(lay: Layout) -> Path:
    return external_model(lay, "junk\\..\\..\\outside\\secret")


@case("ext_absolute", "3", INVALID, r"model\.onnx: .*absolute path")
def _(lay: Layout) -> Path:
    return external_model(lay, str(lay.secret))


@case("ext_windows_drive", "3", INVALID, r"model\.onnx: .*absolute path")
def _(lay: Layout) -> Path:
    return external_model(lay, "C:\\Windows\\win.ini")


@case("ext_windows_unc", "3", INVALID, r"model\.onnx: .*absolute path")
def _(lay: Layout) -> Path:
    return external_model(lay, "\\\\server\\share\\w.bin")


@case("ext_symlinked_file", "4", INVALID, r"model\.onnx: .*symbolic link")
def _(lay: Layout) -> Path:
    os.symlink(lay.secret, lay.model_dir / "w.bin")
    return external_model(lay, "w.bin")


@case("ext_symlinked_parent", "4", INVALID, r"model\.onnx: .*symbolic link")
def _(lay: Layout) -> Path:
    os.symlink(lay.outside / "dir", lay.model_dir / "sub")
    return external_model(lay, "sub/w.bin")


@case("ext_relative_symlink_inside", "4", INVALID, r"model\.onnx: .*symbolic link")
def _(lay: Layout) -> Path:
    (lay.model_dir / "real.bin").write_bytes(weights_bytes())
    os.symlink("real.bin", lay.model_dir / "w.bin")
    return external_model(lay, "w.bin")


@case("ext_hard_link", "4", INVALID, r"model\.onnx: .*hard links")
def _(lay: Layout) -> Path:
    os.link(lay.secret, lay.model_dir / "w.bin")
    return external_model(lay, "w.bin")


@case("ext_fifo", "4", INVALID, r"model\.onnx: .*not a regular file", timeout=20)
def _(lay: Layout) -> Path:
    os.mkfifo(lay.model_dir / "w.bin")
    return external_model(lay, "w.bin")


@case("ext_directory", "4", INVALID, r"model\.onnx: .*not a regular file")
def _(lay: Layout) -> Path:
    (lay.model_dir / "w.bin").mkdir()
    return external_model(lay, "w.bin")


@case("ext_unknown_key", "6", INVALID, r"model\.onnx: .*'w'.*unknown external data key '__class__'")
def _(lay: Layout) -> Path:
    (lay.model_dir / "w.bin").write_bytes(weights_bytes())
    return external_model(lay, "w.bin", extra=(("__class__", "os.system"),))


@case("ext_basepath_key", "6", INVALID, r"model\.onnx: .*unknown external data key 'basepath'")
def _(lay: Layout) -> Path:
    (lay.model_dir / "w.bin").write_bytes(weights_bytes())
    return external_model(lay, "w.bin", extra=(("basepath", str(lay.outside)),))


@case("ext_duplicate_key", "6", INVALID, r"model\.onnx: .*'location' given twice")
def _(lay: Layout) -> Path:
    (lay.model_dir / "w.bin").write_bytes(weights_bytes())
    return external_model(lay, "w.bin", extra=(("location", "../outside/secret"),))


def _bad_range_case(name: str, offset: str | None, length: str | None, message: str, data: bytes | None = None):
    @case(name, "7", INVALID, message)
    def _(lay: Layout) -> Path:
        (lay.model_dir / "w.bin").write_bytes(weights_bytes() if data is None else data)
        return external_model(lay, "w.bin", offset=offset, length=length)


_bad_range_case("ext_negative_offset", "-8", "128", r"model\.onnx: .*bad external data offset '-8'")
_bad_range_case("ext_nonnumeric_offset", "0x10", "128", r"bad external data offset '0x10'")
_bad_range_case("ext_float_offset", "1e3", "128", r"bad external data offset '1e3'")
_bad_range_case("ext_overflowing_offset", "9" * 40, "128", r"bad external data offset")
_bad_range_case("ext_offset_2_63", str(2**63), "128", r"bad external data offset")
_bad_range_case("ext_negative_length", "0", "-128", r"bad external data length '-128'")
_bad_range_case("ext_huge_length", "0", str(2**62), r"length \d+ does not match the 128 bytes")
_bad_range_case("ext_length_not_dims", "0", "64", r"length 64 does not match the 128 bytes")
_bad_range_case("ext_length_past_eof", "64", "128", r"range \[64, \+128\) is outside the file \(128 bytes\)")
_bad_range_case("ext_offset_past_eof", "4096", None, r"is outside the file")
_bad_range_case("ext_short_file_no_length", "0", None, r"range \[0, \+128\) is outside the file \(100 bytes\)",
                data=b"\0" * 100)


@case("ext_missing_file", "8", MISSING, r"model\.onnx: .*'absent\.bin'.*does not exist")
def _(lay: Layout) -> Path:
    return external_model(lay, "absent.bin")


@case("ext_missing_location", "8", INVALID, r"model\.onnx: .*without a location")
def _(lay: Layout) -> Path:
    model = good_model()
    t = model.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    return save(lay, model)


@case("ext_checksum_mismatch", "9", INVALID, r"model\.onnx: .*checksum mismatch")
def _(lay: Layout) -> Path:
    (lay.model_dir / "w.bin").write_bytes(weights_bytes())
    wrong = hashlib.sha256(b"the weights the model was saved with").hexdigest()
    return external_model(lay, "w.bin", extra=(("checksum", wrong),))


@case("ext_checksum_malformed", "9", INVALID, r"model\.onnx: .*not a SHA-1 or SHA-256")
def _(lay: Layout) -> Path:
    (lay.model_dir / "w.bin").write_bytes(weights_bytes())
    return external_model(lay, "w.bin", extra=(("checksum", "'; rm -rf / #"),))


@case("ext_location_names_output", "10", INVALID, r"model\.onnx: .*leaves the model's folder")
def _(lay: Layout) -> Path:
    return external_model(lay, "../out/manifest.json")


# ---- the model file itself (items 11, 19) ----------------------------------------------------------------

@case("model_truncated", "11", INVALID, r"model\.onnx: cannot parse the model")
def _(lay: Layout) -> Path:
    data = good_model().SerializeToString()
    lay.model.write_bytes(data[: len(data) // 2])
    return lay.model


@case("model_random_bytes", "11", INVALID, r"model\.onnx: ")
def _(lay: Layout) -> Path:
    lay.model.write_bytes(np.random.default_rng(7).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    return lay.model


@case("model_empty_file", "11", INVALID, r"model\.onnx: ")
def _(lay: Layout) -> Path:
    lay.model.write_bytes(b"")
    return lay.model


@case("model_missing", "8", MISSING, r"model\.onnx: .*(no such file|does not exist)")
def _(lay: Layout) -> Path:
    return lay.model


@case("model_is_fifo", "4", INVALID, r"model\.onnx: not a regular file", timeout=20)
def _(lay: Layout) -> Path:
    os.mkfifo(lay.model)
    return lay.model


@case("initializer_payload_short", "12", INVALID, r"model\.onnx: .*tensor name: w\).*too small")
def _(lay: Layout) -> Path:
    model = good_model()
    model.graph.initializer[0].raw_data = b"\0" * 12
    return save(lay, model)


@case("initializer_payload_huge_dims", "12,13", INVALID, r"model\.onnx: .*overflow.*tensor name: w\)")
def _(lay: Layout) -> Path:
    model = good_model()
    del model.graph.initializer[0].dims[:]
    model.graph.initializer[0].dims.extend([2**40, 2**40])
    return save(lay, model)


# ---- size and resource exhaustion (items 13-16) -----------------------------------------------------------

@case("negative_input_dim", "13", INVALID, r"model\.onnx: value 'x' has a negative dim -3")
def _(lay: Layout) -> Path:
    model = good_model()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -3
    return save(lay, model)


@case("overflowing_input_dims", "13", INVALID, r"model\.onnx: value 'x' with dims .* bytes, more than 2\*\*48")
def _(lay: Layout) -> Path:
    m = model_of([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2**40, 2**40, 2**40])],
                 [vi("y", [2**40, 2**40, 2**40])])
    return save(lay, m)


@case("overflowing_reshape_dims", "13", INVALID, r"model\.onnx: ")
def _(lay: Layout) -> Path:
    shape = numpy_helper.from_array(np.array([2**62, 2**62, 0], np.int64), "shape")
    m = model_of([helper.make_node("Reshape", ["x", "shape"], ["y"])], [vi("x", [2, 4])],
                 [vi("y", [2**62, 2**62, 0])], [shape])
    return save(lay, m)


@case("petabyte_constant_of_shape", "14", (0, INVALID), r"model\.onnx: ", timeout=120)
def _(lay: Layout) -> Path:
    """A ~150-byte model asking for a 4 PiB tensor that is reduced to a scalar: a splat must stay a splat."""
    shape = numpy_helper.from_array(np.array([2**25, 2**25], np.int64), "shape")
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    m = model_of([helper.make_node("ConstantOfShape", ["shape"], ["big"], value=one),
                  helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0),
                  helper.make_node("Add", ["x", "s"], ["y"])],
                 [vi("x", [1])], [vi("y", [1])], [shape])
    return save(lay, m)


@case("petabyte_constant_of_shape_output", "14", (0, INVALID), r"model\.onnx: ", timeout=120)
def _(lay: Layout) -> Path:
    shape = numpy_helper.from_array(np.array([2**25, 2**25], np.int64), "shape")
    m = model_of([helper.make_node("ConstantOfShape", ["shape"], ["y"])], [], [vi("y", [2**25, 2**25])], [shape])
    return save(lay, m)


@case("petabyte_expand", "14", (0, INVALID), r"model\.onnx: ", timeout=120)
def _(lay: Layout) -> Path:
    shape = numpy_helper.from_array(np.array([2**24, 2**24, 1], np.int64), "shape")
    m = model_of([helper.make_node("Expand", ["x", "shape"], ["big"]),
                  helper.make_node("ReduceMax", ["big"], ["y"], keepdims=0)],
                 [vi("x", [1, 1, 4])], [vi("y", [])], [shape])
    return save(lay, m)


@case("huge_rank", "15", (0, INVALID, UNSUPPORTED), r"model\.onnx: ", timeout=120)
def _(lay: Layout) -> Path:
    dims = [1] * 5000
    return save(lay, model_of([helper.make_node("Relu", ["x"], ["y"])], [vi("x", dims)], [vi("y", dims)]))


def _field(num: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def nested_if_bytes(depth: int, cond_known: bool) -> bytes:
    """A serialized model of If nodes nested ``depth`` deep (each then-branch holds the next If; the innermost
    computes x + 1, every else-branch -x), built as raw protobuf: onnx.helper itself refuses past ~100 levels."""
    def value_info(name: str) -> bytes:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, [1]).SerializeToString()

    def graph(name: str, node: bytes, output: str, initializer: bytes = b"") -> bytes:
        return _field(1, node) + _field(2, name.encode()) + (_field(5, initializer) if initializer else b"") \
            + _field(12, value_info(output))

    def graph_attr(name: str, g: bytes) -> bytes:
        return _field(1, name.encode()) + _field(6, g) + _varint(20 << 3) + _varint(onnx.AttributeProto.GRAPH)

    one = numpy_helper.from_array(np.array([1.0], np.float32), "one").SerializeToString()
    inner = graph("leaf", helper.make_node("Add", ["x", "one"], ["r0"]).SerializeToString(), "r0", one)
    for level in range(1, depth + 1):
        other = graph(f"else{level}", helper.make_node("Neg", ["x"], [f"e{level}"]).SerializeToString(), f"e{level}")
        node = _field(1, b"c") + _field(2, f"r{level}".encode()) + _field(3, f"if{level}".encode()) \
            + _field(4, b"If") + _field(5, graph_attr("then_branch", inner)) \
            + _field(5, graph_attr("else_branch", other))
        inner = node  # the top level keeps the node itself
        if level < depth:
            inner = graph(f"level{level}", node, f"r{level}")
    top = onnx.ModelProto()
    top.ir_version = IR_VERSION
    top.opset_import.add().CopyFrom(helper.make_opsetid("", OPSET))
    g = top.graph
    g.name = "nested"
    if cond_known:
        g.initializer.add().CopyFrom(numpy_helper.from_array(np.array(True), "c"))
    else:
        g.input.add().CopyFrom(helper.make_tensor_value_info("c", TensorProto.BOOL, []))
    g.input.add().CopyFrom(helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]))
    g.output.add().CopyFrom(helper.make_tensor_value_info(f"r{depth}", TensorProto.FLOAT, [1]))
    return top.SerializeToString() + _field(7, _field(1, inner))  # a repeated field may come in pieces


@case("if_nested_3000_deep", "15", INVALID, r"model\.onnx: cannot parse the model", timeout=60)
def _(lay: Layout) -> Path:
    lay.model.write_bytes(nested_if_bytes(3000, cond_known=True))
    return lay.model


@case("protobuf_nesting_bomb", "15", INVALID, r"model\.onnx: ", timeout=60)
def _(lay: Layout) -> Path:
    """Raw bytes: a GraphProto attribute inside a node inside a graph... 100,000 levels, built without onnx
    (headers computed innermost first, then joined once: linear time)."""
    headers: list[bytes] = []
    length = 0
    for _ in range(100_000):  # GraphProto.node(1) <- NodeProto.attribute(5) <- AttributeProto.g(6), innermost first
        for num in (6, 5, 1):
            h = _varint(num << 3 | 2) + _varint(length)
            headers.append(h)
            length += len(h)
    model = _field(7, b"".join(reversed(headers))) + _varint(1 << 3) + _varint(8)  # graph(7), ir_version(1)
    lay.model.write_bytes(model)
    return lay.model


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


@case("loop_unbounded_trip_count", "15", (INVALID, UNSUPPORTED), r"model\.onnx: .*Loop", timeout=60)
def _(lay: Layout) -> Path:
    body = helper.make_graph([helper.make_node("Identity", ["cond_in"], ["cond_out"]),
                              helper.make_node("Add", ["v_in", "one"], ["v_out"])], "body",
                             [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("v_in", [1])],
                             [vi("cond_out", [], TensorProto.BOOL), vi("v_out", [1])],
                             [numpy_helper.from_array(np.array([1.0], np.float32), "one")])
    trips = numpy_helper.from_array(np.array(2**62, np.int64), "trips")
    cond = numpy_helper.from_array(np.array(True), "cond")
    m = model_of([helper.make_node("Loop", ["trips", "cond", "x"], ["y"], body=body)],
                 [vi("x", [1])], [vi("y", [1])], [trips, cond])
    return save(lay, m)


@case("recursive_local_function", "16", INVALID, r"model\.onnx: .*local::f -> local::f.*must not be recursive")
def _(lay: Layout) -> Path:
    f = helper.make_function("local", "f", ["a"], ["b"], [helper.make_node("f", ["a"], ["b"], domain="local")],
                             [helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)])
    m = model_of([helper.make_node("f", ["x"], ["y"], domain="local")], [vi("x", [2])], [vi("y", [2])],
                 opsets=[helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)], functions=[f])
    return save(lay, m)


@case("mutually_recursive_functions", "16", INVALID,
      r"model\.onnx: .*local::(f|g) -> local::(f|g) -> local::(f|g).*must not be recursive")
def _(lay: Layout) -> Path:
    ops = [helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)]
    f = helper.make_function("local", "f", ["a"], ["b"], [helper.make_node("g", ["a"], ["b"], domain="local")], ops)
    g = helper.make_function("local", "g", ["a"], ["b"], [helper.make_node("Neg", ["a"], ["c"]),
                                                          helper.make_node("f", ["c"], ["b"], domain="local")], ops)
    m = model_of([helper.make_node("f", ["x"], ["y"], domain="local")], [vi("x", [2])], [vi("y", [2])],
                 opsets=ops, functions=[f, g])
    return save(lay, m)


# ---- graph semantics (items 17-23) -----------------------------------------------------------------------

@case("cycle", "17", INVALID, r"model\.onnx: the graph has a cycle: 'loop_a' \(Add\) -> 'loop_b' \(Relu\) -> "
                              r"'loop_a' \(Add\)")
def _(lay: Layout) -> Path:
    m = model_of([helper.make_node("Add", ["x", "b"], ["a"], name="loop_a"),
                  helper.make_node("Relu", ["a"], ["b"], name="loop_b"),
                  helper.make_node("Neg", ["a"], ["y"], name="out")], [vi("x", [2])], [vi("y", [2])])
    return save(lay, m)


@case("self_loop", "17", INVALID, r"model\.onnx: the graph has a cycle: 'me' \(Add\) -> 'me' \(Add\)")
def _(lay: Layout) -> Path:
    m = model_of([helper.make_node("Add", ["x", "y"], ["y"], name="me")], [vi("x", [2])], [vi("y", [2])])
    return save(lay, m)


@case("duplicate_output_names", "18", INVALID, r"model\.onnx: .*'t'")
def _(lay: Layout) -> Path:
    m = model_of([helper.make_node("Relu", ["x"], ["t"], name="first"),
                  helper.make_node("Neg", ["x"], ["t"], name="second"),
                  helper.make_node("Abs", ["t"], ["y"])], [vi("x", [2])], [vi("y", [2])])
    return save(lay, m)


@case("input_shadowed_by_node", "18", INVALID, r"model\.onnx: .*'x'")
def _(lay: Layout) -> Path:
    m = model_of([helper.make_node("Relu", ["x"], ["x"], name="shadow"), helper.make_node("Neg", ["x"], ["y"])],
                 [vi("x", [2])], [vi("y", [2])])
    return save(lay, m)


@case("undefined_input", "19", INVALID, r"model\.onnx: .*'ghost'")
def _(lay: Layout) -> Path:
    m = model_of([helper.make_node("Add", ["x", "ghost"], ["y"], name="adder")], [vi("x", [2])], [vi("y", [2])])
    return save(lay, m)


@case("undefined_elem_type", "19", (INVALID, UNSUPPORTED), r"model\.onnx: .*'x'")
def _(lay: Layout) -> Path:
    m = model_of([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2], TensorProto.UNDEFINED)], [vi("y", [2])])
    return save(lay, m)


@case("attribute_wrong_type", "19", INVALID, r"model\.onnx: .*axis")
def _(lay: Layout) -> Path:
    m = model_of([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis="minus one")], [vi("x", [2, 3])],
                 [vi("y", [2, 3])])
    return save(lay, m)


@case("attribute_missing_required", "19", INVALID, r"model\.onnx: .*(to|Cast)")
def _(lay: Layout) -> Path:
    m = model_of([helper.make_node("Cast", ["x"], ["y"], name="caster")], [vi("x", [2])], [vi("y", [2])])
    return save(lay, m)


@case("attribute_bogus_value", "19", INVALID, r"model\.onnx: .*(axis|Softmax)")
def _(lay: Layout) -> Path:
    m = model_of([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=7)], [vi("x", [2, 3])], [vi("y", [2, 3])])
    return save(lay, m)


@case("attribute_huge_perm", "19", INVALID, r"model\.onnx: .*(perm|Transpose)")
def _(lay: Layout) -> Path:
    m = model_of([helper.make_node("Transpose", ["x"], ["y"], name="tr", perm=[0, 2**60])], [vi("x", [2, 3])],
                 [vi("y", [3, 2])])
    return save(lay, m)


@case("conv_channel_mismatch", "19,20", INVALID, r"model\.onnx: .*(conv|channel|Conv)")
def _(lay: Layout) -> Path:
    w = numpy_helper.from_array(np.ones((4, 5, 3, 3), np.float32), "w")  # 5 input channels, the input has 3
    m = model_of([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], [vi("x", [1, 3, 8, 8])],
                 [vi("y", [1, 4, 6, 6])], [w])
    return save(lay, m)


@case("matmul_inner_mismatch", "19,20", INVALID, r"model\.onnx: .*(mm|MatMul)")
def _(lay: Layout) -> Path:
    w = numpy_helper.from_array(np.ones((5, 3), np.float32), "w")
    m = model_of([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [vi("x", [2, 4])], [vi("y", [2, 3])], [w])
    return save(lay, m)


@case("wrong_declared_output_shape", "20", INVALID, r"model\.onnx: ")
def _(lay: Layout) -> Path:
    m = model_of([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2, 3])], [vi("y", [7, 7])])
    return save(lay, m)


@case("unknown_ops_custom_domains", "21", UNSUPPORTED,
      r"model\.onnx: 3 unsupported nodes: 'a' \(FrobnicateV2, ai\.onnx opset 17\), 'b' \(Gizmo, com\.evil opset 1\), "
      r"'c' \(Gizmo, com\.evil opset 1\)")
def _(lay: Layout) -> Path:
    m = model_of([helper.make_node("FrobnicateV2", ["x"], ["t"], name="a"),
                  helper.make_node("Gizmo", ["t"], ["u"], name="b", domain="com.evil"),
                  helper.make_node("Gizmo", ["u"], ["y"], name="c", domain="com.evil")],
                 [vi("x", [2])], [vi("y", [2])],
                 opsets=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.evil", 1)])
    return save(lay, m)


@case("opset_too_new", "21", UNSUPPORTED, r"model\.onnx: .*opset 9999")
def _(lay: Layout) -> Path:
    m = good_model()
    m.opset_import[0].version = 9999
    return save(lay, m)


@case("ir_version_too_new", "21", UNSUPPORTED, r"model\.onnx: .*IR version 999")
def _(lay: Layout) -> Path:
    m = good_model()
    m.ir_version = 999
    return save(lay, m)


@case("gather_index_out_of_range_folded", "22", INVALID, r"model\.onnx: .*(index|indices|range)")
def _(lay: Layout) -> Path:
    data = numpy_helper.from_array(np.arange(6, dtype=np.float32), "data")
    idx = numpy_helper.from_array(np.array([1, 2**40], np.int64), "idx")
    m = model_of([helper.make_node("Gather", ["data", "idx"], ["g"], name="gather"),
                  helper.make_node("Add", ["x", "g"], ["y"])], [vi("x", [2])], [vi("y", [2])], [data, idx])
    return save(lay, m)


@case("chain_50000_nodes", "15", (0, INVALID), r"model\.onnx: ", slow=True, timeout=600)
def _(lay: Layout) -> Path:
    nodes = [helper.make_node("Neg", [f"t{i}" if i else "x"], [f"t{i + 1}" if i + 1 < 50_000 else "y"])
             for i in range(50_000)]
    return save(lay, model_of(nodes, [vi("x", [4])], [vi("y", [4])]))


# ---- legal models with names built to break generated code (items 23-26) -------------------------------

PAYLOAD = "__import__('os').system('touch PWNED')"
DOC_PAYLOAD = "doc:\"\"\"\n" + PAYLOAD + "\n'''#"  # doc strings and metadata: copied nowhere

NASTY_NAMES = [
    PAYLOAD,
    "\"); __import__('os').system('touch PWNED'); (\"",
    "'''; __import__('os').system('touch PWNED'); '''",
    '"""\nimport os; os.system("touch PWNED")\n"""',
    "x\n    import os\nos.system('touch PWNED')  #",
    "# comment }}{% raw %}{{ 7*7 }}",
    "{{ cycler.__init__.__globals__.os.system('touch PWNED') }}",
    "class", "def", "lambda", "None", "print", "tl", "triton", "__builtins__",
    "0leading_digit", "123",
    "a-b", "a_b", "a b", "a.b", "a/b", "a\\b",
    "ünïcödé", "名前", "\u202eevil", "🔥",
    "$(touch PWNED)", "`touch PWNED`", "../../../../tmp/PWNED_path", "/etc/passwd",
    "x" * 10_000,
]


def nasty_name_model() -> onnx.ModelProto:
    """A legal model whose every string is hostile: value names (inputs, outputs, initializers, intermediates),
    node names (one empty), graph name, doc strings and metadata. Every name is distinct, so the model is valid;
    several collide once cleaned (a-b, a_b, a b, a.b...)."""
    names = NASTY_NAMES
    n = len(names)
    inputs = [vi(names[0], [3, 5]), vi(names[1], [3, 5])]
    inits = [numpy_helper.from_array(np.linspace(-2, 2, 15, dtype=np.float32).reshape(3, 5), names[2])]
    nodes = []
    prev = names[0]
    ops = ["Add", "Mul", "Sub", "Max", "Min"]
    for i, name in enumerate(names[3:], start=3):
        other = names[1] if i % 2 else names[2]
        op = ops[i % len(ops)]
        node = helper.make_node(op, [prev, other], [name], name="" if i == 3 else f"node {name}",
                                doc_string=DOC_PAYLOAD)
        nodes.append(node)
        if i % 4 == 0:
            act = f"{name}::relu\n"
            nodes.append(helper.make_node("Relu", [name], [act], name=act))
            name = act
        prev = name
    nodes.append(helper.make_node("Tanh", [prev], ["last \"out\"\n" + PAYLOAD]))
    outputs = [vi("last \"out\"\n" + PAYLOAD, [3, 5]), vi(names[6], [3, 5]), vi(names[n // 2], [3, 5])]
    graph = helper.make_graph(nodes, PAYLOAD + "\"\"\"graph", inputs, outputs, inits, doc_string="graph " + DOC_PAYLOAD)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], doc_string="model " + DOC_PAYLOAD,
                              ir_version=IR_VERSION,
                              producer_name="producer " + DOC_PAYLOAD, producer_version="version " + DOC_PAYLOAD)
    helper.set_model_props(model, {PAYLOAD: "meta " + DOC_PAYLOAD, "\n\"": "meta '''"})
    return model


def passthrough_model() -> onnx.ModelProto:
    """Item 23: graph outputs that are a graph input and a constant, beside a computed one."""
    c = numpy_helper.from_array(np.array([1.5, -2.0], np.float32), "const_out")
    return model_of([helper.make_node("Relu", ["x"], ["r"])], [vi("x", [2, 3])],
                    [vi("x", [2, 3]), vi("const_out", [2]), vi("r", [2, 3])], [c])


def scalar_output_model() -> onnx.ModelProto:
    """Item 23: a rank-0 output."""
    return model_of([helper.make_node("ReduceSum", ["x"], ["scalar"], keepdims=0)], [vi("x", [2, 3])],
                    [vi("scalar", [])])


def empty_tensor_model() -> onnx.ModelProto:
    """Item 23: zero-size tensors in and out."""
    z = numpy_helper.from_array(np.zeros((0, 3), np.float32), "zero")
    return model_of([helper.make_node("Add", ["e", "zero"], ["s"]), helper.make_node("Relu", ["s"], ["empty_out"])],
                    [vi("e", [0, 3])], [vi("empty_out", [0, 3])], [z])
