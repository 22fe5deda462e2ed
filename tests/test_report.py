"""mlcc report: one self-contained, escaped HTML file; the graph it draws and the layout it draws it with."""

from __future__ import annotations

import json
import math
import random
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import mlcc
from mlcc.cli import main
from mlcc.emit.target.targets import device_model
from mlcc.hlo.parser import parse_module
from mlcc.inspect import load_bundle, summarize
from mlcc.report import write_report
from mlcc.report.charts import memory_timeline, roofline
from mlcc.report.graph import SourceGraph, collapse, source_graph
from mlcc.report.layout import Box, layered_layout

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "models"
EVIL = "<script>alert(1)</script>"
QUOTED = "q\"uote's & <b>"
SECTIONS = ("graph", "kernels", "memory", "roofline")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "mlp"
    mlcc.compile(EXAMPLES / "mlp.onnx", out, targets=[])
    return out


@pytest.fixture(scope="module")
def report(bundle, tmp_path_factory) -> Path:
    return write_report(bundle, tmp_path_factory.mktemp("html") / "report.html")


class Page(HTMLParser):
    """Every start tag with its attributes and the section it sits in; text per section."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None], str | None]] = []
        self.section: str | None = None
        self.text: dict[str | None, list[str]] = {}
        self.open_script: str | None = None
        self.scripts: list[tuple[dict, str]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.section = a.get("id")
        if tag == "script":
            self.open_script = ""
            self.scripts.append((a, ""))
        self.tags.append((tag, a, self.section))

    def handle_endtag(self, tag):
        if tag == "section":
            self.section = None
        if tag == "script" and self.scripts:
            self.scripts[-1] = (self.scripts[-1][0], self.open_script or "")
            self.open_script = None

    def handle_data(self, data):
        if self.open_script is not None:
            self.open_script += data
        self.text.setdefault(self.section, []).append(data)


def _parse(html: str) -> Page:
    p = Page()
    p.feed(html)
    p.close()
    return p


def test_report_is_one_self_contained_file(bundle, report):
    html = report.read_text()
    page = _parse(html)
    assert "http://" not in html and "https://" not in html
    for tag, attrs, _ in page.tags:
        assert tag not in ("link", "iframe", "object", "embed", "img"), tag
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
        for k in ("src", "href"):
            assert attrs.get(k) is None or attrs[k].startswith("#"), (tag, attrs)
    # the only script is data, never run
    assert [a.get("type") for a, _ in page.scripts] == ["application/json"]
    data = json.loads(page.scripts[0][1])
    assert data == json.loads(json.dumps(summarize(bundle, "H100")))
    for section in SECTIONS:
        assert any(tag == "svg" and sec == section for tag, _, sec in page.tags), section
    manifest = json.loads((bundle / "manifest.json").read_text())
    kernel_text = "".join(page.text["kernels"])
    source_text = "".join(page.text["sources"])
    for k in manifest["kernels"]:
        assert k["name"] in kernel_text
        assert (bundle / k["source"]).read_text().strip() in source_text  # the Triton source, unescaped back
    assert html.count("<details") == len(manifest["kernels"])


def test_graph_draws_every_source_op_and_launch(bundle, report):
    page = _parse(report.read_text())
    titles = "".join(page.text["graph"])
    module = parse_module((bundle / "model.hlo").read_text())
    manifest = json.loads((bundle / "manifest.json").read_text())
    origins = {o for i in module.entry.instructions for o in i.origin}
    assert origins and all(o in titles for o in origins)
    frames = [a for tag, a, sec in page.tags if sec == "graph" and tag == "g" and a.get("class") == "cluster"]
    assert len(frames) == len(manifest["schedule"])  # one frame per launch (no group big enough to collapse)
    for s in manifest["schedule"]:
        assert f"launch step {s['step']}:" in titles


def test_memory_and_roofline_sections(bundle, report):
    page = _parse(report.read_text())
    manifest = json.loads((bundle / "manifest.json").read_text())
    bars = [a for tag, a, sec in page.tags if sec == "memory" and tag == "rect" and a.get("class") == "buf"]
    assert len(bars) == len(manifest["memory_plan"]["buffers"])
    dots = [a for tag, a, sec in page.tags if sec == "roofline" and tag == "circle"]
    assert len(dots) == len(manifest["kernels"])


def test_hostile_names_are_escaped(tmp_path):
    w = numpy_helper.from_array(np.ones((8, 8), np.float32), "w" + QUOTED)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x" + QUOTED, "w" + QUOTED], ["h"], name=EVIL),
         helper.make_node("Relu", ["h"], ["y" + QUOTED], name=QUOTED)],
        EVIL, [helper.make_tensor_value_info("x" + QUOTED, TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y" + QUOTED, TensorProto.FLOAT, [4, 8])], [w])
    model_file = tmp_path / "m\"'<i>&.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model_file)
    mlcc.compile(model_file, tmp_path / "b", targets=[])
    html = write_report(tmp_path / "b", tmp_path / "r.html").read_text()
    assert EVIL not in html and QUOTED not in html and "<i>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "q&#34;uote&#39;s &amp; &lt;b&gt;" in html
    page = _parse(html)
    assert [t for t, _, _ in page.tags].count("script") == 1
    assert "b" not in {t for t, _, _ in page.tags}
    assert all(a.get("style", "").startswith("background") for t, a, _ in page.tags if t == "i")  # legend swatches
    assert EVIL in "".join(page.text["graph"])  # shown to the reader, as text
    assert json.loads(page.scripts[0][1])["model"]["file"] == model_file.name


def test_cli_report(bundle, tmp_path):
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", str(bundle), "-o", str(out), "--device-model", "A100"])
    assert r.exit_code == 0, r.output
    assert "Roofline (A100)" in out.read_text()
    r = CliRunner().invoke(main, ["report", str(tmp_path / "missing"), "-o", str(out)])
    assert r.exit_code == 66
    r = CliRunner().invoke(main, ["report", str(bundle), "-o", str(out / "inside_a_file.html")])
    assert r.exit_code == 73


def test_compile_writes_the_report_too(bundle, tmp_path):
    out, html = tmp_path / "b", tmp_path / "compile_report.html"
    r = CliRunner().invoke(main, ["compile", str(EXAMPLES / "mlp.onnx"), "-o", str(out), "--target", "none",
                                  "--report", str(html), "-q"])
    assert r.exit_code == 0, r.output
    separate = tmp_path / "separate.html"
    assert CliRunner().invoke(main, ["report", str(out), "-o", str(separate)]).exit_code == 0
    assert html.read_text() == separate.read_text()  # the same page mlcc report writes for the bundle
    assert json.loads((out / "manifest.json").read_text())["kernels"][0]["name"] in html.read_text()


# ---- the source graph ------------------------------------------------------

FUSED_IR = """HloModule t, output_names={y,z}

%fused {
  %p0 = f32[4,8]{1,0} parameter(0)
  %p1 = f32[4,8]{1,0} parameter(1)
  %a = f32[4,8]{1,0} add(%p0, %p1), origin={add_1}
  %b = f32[4,8]{1,0} broadcast(%p1), dimensions={0,1}, origin={add_1}
  %m = f32[4,8]{1,0} multiply(%a, %b), origin={mul_2}
  ROOT %r = f32[4,8]{1,0} relu(%m), origin={relu_3}
}

ENTRY %main {
  %x = f32[4,8]{1,0} parameter(0), name=x
  %w = f32[8,8]{1,0} constant(), splat=1.0
  %d = f32[4,8]{1,0} dot(%x, %w), lhs_batch_dims={}, lhs_contracting_dims={1}, rhs_batch_dims={}, rhs_contracting_dims={0}, origin={mm_0}
  %ln = f32[4,8]{1,0} rms-norm(%d, %w), dimensions={1}, epsilon=1e-05, origin={pow_a,mean_b,sqrt_c}
  %f = f32[4,8]{1,0} fusion(%d, %ln), kind=loop, calls=%fused
  %v = f32[32]{0} bitcast(%f), origin={reshape_4}
  ROOT %out = (f32[4,8]{1,0}, f32[32]{0}) tuple(%f, %v)
}
"""
FUSED_SCHEDULE = [{"step": 0, "kernel": "k_dot", "instruction": "d"},
                  {"step": 1, "kernel": "k_norm", "instruction": "ln"},
                  {"step": 2, "kernel": "k_fused", "instruction": "f"}]


def _by_sources(g: SourceGraph) -> dict[tuple[str, ...], object]:
    return {tuple(n.sources): n for n in g.nodes.values()}


def test_source_graph_follows_fusion_bodies():
    g = source_graph(parse_module(FUSED_IR), FUSED_SCHEDULE, {"k_fused": "loop"})
    nodes = _by_sources(g)
    assert set(nodes) == {("x",), ("mm_0",), ("pow_a", "mean_b", "sqrt_c"), ("add_1",), ("mul_2",), ("relu_3",),
                          ("reshape_4",), ("y",), ("z",)}
    assert nodes[("add_1",)].opcodes == ["add", "broadcast"]  # one source op, two IR instructions
    assert [nodes[(s,)].group for s in ("add_1", "mul_2", "relu_3")] == [2, 2, 2]
    assert nodes[("mm_0",)].group == 0 and nodes[("reshape_4",)].group is None
    assert g.groups[2].kernel == "k_fused" and g.groups[2].fusion_kind == "loop"
    edges = {(tuple(g.nodes[a].sources), tuple(g.nodes[b].sources)) for a, b in g.edges}
    norm = ("pow_a", "mean_b", "sqrt_c")
    assert edges == {(("x",), ("mm_0",)), (("mm_0",), norm), (("mm_0",), ("add_1",)), ((norm), ("add_1",)),
                     (("add_1",), ("mul_2",)), (("mul_2",), ("relu_3",)), (("relu_3",), ("y",)),
                     (("relu_3",), ("reshape_4",)), (("reshape_4",), ("z",))}


def test_collapse_replaces_big_groups_by_one_node():
    g = source_graph(parse_module(FUSED_IR), FUSED_SCHEDULE, {})
    small = collapse(g, 2)
    grp = [n for n in small.nodes.values() if n.kind == "group"]
    assert len(grp) == 1 and grp[0].group == 2 and set(grp[0].sources) == {"add_1", "mul_2", "relu_3"}
    assert small.groups[2].collapsed and not small.groups[0].collapsed
    edges = {(small.nodes[a].label, small.nodes[b].label) for a, b in small.edges}
    assert ("mm_0", "k_fused") in edges and ("k_fused", "y") in edges and ("k_fused", "reshape_4") in edges
    assert collapse(g, 3) is g


# ---- the layout ------------------------------------------------------------

def _overlap(a: Box, b: Box) -> bool:
    return a.x < b.x + b.w - 0.5 and b.x < a.x + a.w - 0.5 and a.y < b.y + b.h - 0.5 and b.y < a.y + a.h - 0.5


def _fusion_like_graph(n: int, seed: int):
    """A random DAG in topological order; clusters are runs of consecutive nodes (so, like fusions, convex)."""
    r = random.Random(seed)
    edges = [(max(0, j - 1 - int(r.expovariate(0.3))), j) for j in range(1, n) for _ in range(r.choice([1, 1, 2, 3]))]
    cluster, i = {}, 0
    while i < n:
        size = r.choice([1, 1, 2, 3, 5])
        if r.random() < 0.8:
            cluster.update({k: f"c{i}" for k in range(i, min(n, i + size))})
        i += size
    sizes = {k: (r.choice([60.0, 90.0, 140.0]), r.choice([22.0, 30.0])) for k in range(n)}
    return sizes, edges, cluster


def _check_layout(sizes, edges, cluster):
    lay = layered_layout(sizes, edges, cluster, stub_fanout=6)
    assert set(lay.nodes) == set(sizes)
    nodes = list(lay.nodes.items())
    boxes = list(lay.clusters.items())
    assert set(lay.clusters) == set(cluster.values())
    for i, (k, a) in enumerate(nodes):
        assert (a.w, a.h) == sizes[k]
        assert 0 <= a.x and a.x + a.w <= lay.width and 0 <= a.y and a.y + a.h <= lay.height
        for _, b in nodes[i + 1:]:
            assert not _overlap(a, b)
        for c, box in boxes:
            if cluster.get(k) == c:
                assert box.x <= a.x and a.x + a.w <= box.x + box.w and box.y <= a.y and a.y + a.h <= box.y + box.h
            else:
                assert not _overlap(a, box), (k, c)
    for i, (_, a) in enumerate(boxes):
        for _, b in boxes[i + 1:]:
            assert not _overlap(a, b)
    for r in lay.edges:  # an edge (or its stub) enters its target's left side; forward edges leave the right side
        s, t = lay.nodes[r.source], lay.nodes[r.target]
        if r.stub or s.x < t.x:
            assert r.points[-1][0] == pytest.approx(t.x) and t.y <= r.points[-1][1] <= t.y + t.h
        if not r.stub and s.x < t.x:
            assert r.points[0][0] == pytest.approx(s.x + s.w) and s.y <= r.points[0][1] <= s.y + s.h
    return lay


@pytest.mark.parametrize("seed", range(6))
def test_layout_never_overlaps(seed):
    sizes, edges, cluster = _fusion_like_graph(70, seed)
    lay = _check_layout(sizes, edges, cluster)
    for a, b in edges:  # a DAG: every edge flows left to right
        assert lay.nodes[a].x + lay.nodes[a].w < lay.nodes[b].x


def test_layout_of_a_large_graph_is_quick_and_clean():
    sizes, edges, cluster = _fusion_like_graph(500, 42)
    lay = _check_layout(sizes, edges, cluster)
    assert lay.height < 40 * 500 / 4  # wide (scrolls sideways), not a tall stack


def test_layout_survives_cycles_and_isolated_nodes():
    sizes = {k: (80.0, 30.0) for k in "abcdef"}
    edges = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "d")]
    lay = _check_layout(sizes, edges, {"b": "g", "c": "g"})
    assert len(lay.edges) == 4  # the self loop is dropped


def test_layout_of_the_bundle_graph(bundle):
    b = load_bundle(bundle)
    g = source_graph(b.module, b.manifest["schedule"], {})
    cluster = {k: f"g{n.group}" for k, n in g.nodes.items() if n.group is not None}
    _check_layout({k: (100.0, 30.0) for k in g.nodes}, g.edges, cluster)


# ---- the charts ------------------------------------------------------------

def test_roofline_points_sit_on_the_device_roof(bundle):
    s = summarize(bundle, "H100")
    chart = roofline(s["kernels"], device_model("H100"), {})
    plotted = [k for k in s["kernels"] if k["arithmetic_intensity"]]
    assert len(chart["points"]) == len(plotted) and len(chart["zero"]) == len(s["kernels"]) - len(plotted)
    # invert the chart's log axes from its own decade ticks and compare with the datasheet roof
    xt, yt = chart["x_ticks"], chart["y_ticks"]
    dx = xt[1]["x"] - xt[0]["x"]
    dy = yt[0]["y"] - yt[1]["y"]
    for k, p in zip(plotted, chart["points"], strict=True):
        ai = 10 ** (math.log10(_si_value(xt[0]["label"])) + (p["x"] - xt[0]["x"]) / dx)
        flops = 10 ** (math.log10(_si_value(yt[0]["label"])) + (yt[0]["y"] - p["y"]) / dy)
        assert ai == pytest.approx(k["flops"] / k["bytes"], rel=1e-6)
        assert flops == pytest.approx(min(66.9e12, ai * 3.35e12), rel=1e-6)


def _si_value(label: str) -> float:
    scale = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
    return float(label[:-1]) * scale[label[-1]] if label[-1] in scale else float(label)


def test_memory_timeline_bars_match_the_plan(bundle):
    m = json.loads((bundle / "manifest.json").read_text())
    chart = memory_timeline(m, {}, {})
    steps, arena = len(m["schedule"]), m["memory_plan"]["arena_bytes"]
    for b, bar in zip(m["memory_plan"]["buffers"], chart["bars"], strict=True):
        assert bar["x"] == pytest.approx(chart["left"] + b["first_step"] * chart["plot_w"] / steps)
        assert bar["y"] == pytest.approx(chart["top"] + b["offset"] / arena * chart["plot_h"])
        assert bar["h"] == pytest.approx(max(b["bytes"] / arena * chart["plot_h"], 1.0))
        assert b["name"] in bar["title"]


# ---- in a real browser -----------------------------------------------------

def _png_pixels(data: bytes) -> np.ndarray:
    """Decode an 8-bit RGB/RGBA PNG (all five row filters) into an array."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6)
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + n
    bpp = 3 if color == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(chunks)), np.uint8).reshape(h, 1 + w * bpp)
    out = np.zeros((h, w * bpp), np.uint8)
    prev = [0] * (w * bpp)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:]
        if f == 0:
            cur = line.astype(np.int64)
        elif f == 1:
            cur = np.cumsum(line.reshape(w, bpp).astype(np.int64), axis=0).reshape(-1) % 256
        elif f == 2:
            cur = (line.astype(np.int64) + np.asarray(prev)) % 256
        else:
            vals, up, rec = line.tolist(), list(prev), [0] * len(prev)
            for i, v in enumerate(vals):
                a = rec[i - bpp] if i >= bpp else 0
                if f == 3:
                    rec[i] = (v + (a + up[i]) // 2) & 255
                else:
                    c = up[i - bpp] if i >= bpp else 0
                    p = a + up[i] - c
                    pa, pb, pc = abs(p - a), abs(p - up[i]), abs(p - c)
                    rec[i] = (v + (a if pa <= pb and pa <= pc else up[i] if pb <= pc else c)) & 255
            cur = np.asarray(rec)
        out[y] = cur
        prev = cur.tolist() if isinstance(cur, np.ndarray) else cur
    return out.reshape(h, w, bpp)[:, :, :3]


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (.ci/run installs Debian's)")
def test_report_in_headless_browser(bundle, report, tmp_path):
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0"]
    url = report.resolve().as_uri()
    dom = subprocess.run(["chromium", *flags, "--dump-dom", url], check=False, capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    for k in json.loads((bundle / "manifest.json").read_text())["kernels"]:
        assert k["name"] in dom.stdout
    shot = tmp_path / "shot.png"
    run = subprocess.run(["chromium", *flags, f"--screenshot={shot}", "--window-size=1200,900", url],
                         check=False, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    for log in (dom.stderr, run.stderr):
        assert "Uncaught" not in log and "ERROR:CONSOLE" not in log, log[-2000:]
    pixels = _png_pixels(shot.read_bytes())
    assert pixels.shape == (900, 1200, 3)
    assert pixels.std() > 10  # not blank
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50  # text, frames and colours, not one flat fill
