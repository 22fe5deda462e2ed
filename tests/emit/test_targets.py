"""The target table: every known target parses to one consistent record, the device models sit on their
chips, and the target package imports without cycles or function-local imports.

Reference figures are the vendors' published ones, not mlcc's table: NVIDIA warps are 32 lanes and AMD
CDNA wavefronts 64; shared memory per SM (the most a block can opt into is 1 KiB less on NVIDIA):
A100 164 KiB, H100 228 KiB, MI250X/MI300X 64 KiB of LDS, MI355X 160 KiB; SMs/CUs: A100 108, H100 SXM 132,
MI250X one GCD 110, MI300X 304, MI355X 256. Datasheet figures of the device models as in intent.json.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mlcc.emit.codegen.kernel import Kernel, LaunchConfig
from mlcc.emit.target.aot import compile_kernel
from mlcc.emit.target.targets import (AMD_GENERIC, DEVICE_MODELS, GENERIC, TARGETS, Target, TargetError,
                                      device_model, parse_target, parse_targets)
from mlcc_test_paths import ROOT

KIB = 1024
SHARED_PER_SM = {"sm_80": 164 * KIB, "sm_90": 228 * KIB, "gfx90a": 64 * KIB, "gfx942": 64 * KIB,
                 "gfx950": 160 * KIB}
SMS = {"sm_80": 108, "sm_90": 132, "gfx90a": 110, "gfx942": 304, "gfx950": 256}
CHIP_OF = {"H100": "sm_90", "H200": "sm_90", "A100": "sm_80"}
DATASHEETS = {
    "H100": {"name": "H100", "hbm_bytes": 80 * 10**9, "hbm_bandwidth": 3.35e12, "l2_bytes": 50 * 2**20,
             "host_link_bandwidth": 64e9,
             "peak_flops": {"fp16": 989.4e12, "bf16": 989.4e12, "tf32": 494.7e12, "fp32": 66.9e12},
             "source": "NVIDIA H100 Tensor Core GPU datasheet, SXM5 column"},
    "H200": {"name": "H200", "hbm_bytes": 141 * 10**9, "hbm_bandwidth": 4.8e12, "l2_bytes": 50 * 2**20,
             "host_link_bandwidth": 64e9,
             "peak_flops": {"fp16": 989.4e12, "bf16": 989.4e12, "tf32": 494.7e12, "fp32": 66.9e12},
             "source": "NVIDIA H200 Tensor Core GPU datasheet, SXM column"},
    "A100": {"name": "A100", "hbm_bytes": 80 * 10**9, "hbm_bandwidth": 2.039e12, "l2_bytes": 40 * 2**20,
             "host_link_bandwidth": 32e9,
             "peak_flops": {"fp16": 312e12, "bf16": 312e12, "tf32": 156e12, "fp32": 19.5e12},
             "source": "NVIDIA A100 Tensor Core GPU datasheet, 80GB SXM column"},
}


def check_consistent(t: Target) -> None:
    if t.name.startswith("sm_"):
        assert (t.backend, t.vendor, t.binary_format, t.warp_size) == ("cuda", "nvidia", "cubin", 32), t
        assert t.arch == int(t.name[3:].rstrip("a")), t
        assert t.max_warps == 32
    else:
        assert t.name.startswith("gfx9"), t
        assert (t.backend, t.vendor, t.binary_format, t.warp_size) == ("hip", "amd", "hsaco", 64), t
        assert t.arch == t.name and t.max_warps == 16
    assert 0 < t.shared_bytes and t.registers in (255, 512) and t.sms >= 0
    assert all(x > 0 and x & (x - 1) == 0 for x in t.half_tile + t.float_tile)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_known_target_parses_to_its_own_consistent_record(name):
    t = parse_target(f" {name} ")
    assert t is TARGETS[name] and t.name == name
    check_consistent(t)
    assert t.shared_bytes <= SHARED_PER_SM[name] and t.sms == SMS[name]


def test_a_valid_name_outside_the_table_takes_its_vendors_figures():
    sm90a = parse_target("sm_90a")
    assert sm90a.name == "sm_90a" and sm90a.arch == 90
    assert {**vars(sm90a), "name": "sm_90"} == vars(TARGETS["sm_90"])
    sm75 = parse_target("sm_75")
    check_consistent(sm75)
    assert sm75.arch == 75 and sm75.sms == 0 and sm75.shared_bytes == GENERIC.shared_bytes
    gfx = parse_target("gfx908")
    check_consistent(gfx)
    assert gfx.sms == 0 and gfx.shared_bytes == AMD_GENERIC.shared_bytes


@pytest.mark.parametrize("name", ["", "sm_", "sm90", "h100", "H100", "gfx", "gfx94z", "sm_90b", "cuda"])
def test_a_name_that_names_no_gpu_is_an_error(name):
    with pytest.raises(TargetError, match="expected sm_NN or gfxNNN"):
        parse_target(name)


def test_a_target_list_is_parsed_once_each_in_order():
    assert [t.name for t in parse_targets("sm_90, sm_80,sm_90,,gfx942 ")] == ["sm_90", "sm_80", "gfx942"]
    assert parse_targets(["sm_80", " "]) == [TARGETS["sm_80"]]
    assert parse_targets("") == []


@pytest.mark.parametrize("name", sorted(DEVICE_MODELS))
def test_device_models_sit_on_their_chips_with_the_datasheet_figures(name):
    d = device_model(name.lower())
    assert d is DEVICE_MODELS[name] and d.target is TARGETS[CHIP_OF[name]]
    assert d.to_json() == DATASHEETS[name]   # what intent.json records: unchanged by the move onto targets
    assert d.l2_bytes == d.target.l2_bytes and d.peak_flops == dict(d.target.peak_flops)
    # roofline: 1 TFLOP at the fp16 peak against 1 GB at the HBM bandwidth, whichever is slower
    flops, nbytes = 1e12, 1e9
    want = max(flops / DATASHEETS[name]["peak_flops"]["fp16"], nbytes / DATASHEETS[name]["hbm_bandwidth"])
    assert d.kernel_seconds(flops, nbytes, "fp16") == pytest.approx(want)
    assert d.kernel_seconds(flops, 0, "int8") == pytest.approx(flops / DATASHEETS[name]["peak_flops"]["fp32"])


def test_an_unknown_device_model_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown device model 'V100' \\(known: H100, H200, A100\\)"):
        device_model("V100")


ADD_ONE = '''import triton
import triton.language as tl


@triton.jit
def add_one(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)
'''


@pytest.mark.parametrize("name", ["sm_80", "gfx942"])
def test_a_target_record_is_what_triton_compiles_for(name):
    """Backend, architecture, warp size and binary format go to triton.compile as they are (no GPU needed)."""
    target = TARGETS[name]
    config = LaunchConfig({"BLOCK": 128}, (1, 1, 1), num_warps=4)
    kernel = Kernel("add_one", "test", ADD_ONE, ["*fp32", "*fp32", "i32"], config, config)
    binary = compile_kernel(kernel, target)
    assert binary.target == name and binary.ext == target.binary_format
    assert binary.data[:4] == b"\x7fELF"   # cubin and hsaco are both ELF
    assert f'"warp_size": {target.warp_size}' in binary.metadata


TARGET_MODULES = ["mlcc/emit/target/__init__.py", "mlcc/emit/target/targets.py", "mlcc/emit/target/aot.py",
                  "mlcc/emit/target/build.py", "mlcc/emit/target/tuning_db.py", "mlcc/emit/target/tune.py",
                  "mlcc/emit/tiling.py", "mlcc/emit/matmul_tiles.py"]


def module_imports(path: Path) -> tuple[set[str], list[str]]:
    """The mlcc modules path imports at module level, and those it imports inside a function."""
    tree = ast.parse(path.read_text())
    top, local = set(), []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            names = [n for n in names if n.startswith("mlcc")]
            if node.col_offset == 0:
                top.update(names)
            else:
                local.extend(names)
    return top, local


def test_the_target_modules_import_at_module_level_and_without_cycles():
    """tiling <- tuning_db <- lower_module: the tuning database reads the tiling registry, never the reverse."""
    graph = {}
    for rel in TARGET_MODULES:
        top, local = module_imports(ROOT / rel)
        assert not local, f"{rel} imports {local} inside a function"
        graph[rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")] = top
    tiling, tuning_db = graph["mlcc.emit.tiling"], graph["mlcc.emit.target.tuning_db"]
    assert "mlcc.emit.tiling" in tuning_db and not any("tuning_db" in m or "lower_module" in m for m in tiling)
    assert "mlcc.emit.codegen.lower_module" not in tuning_db
    # no cycle among these modules (an edge to a package counts as one to its __init__)
    def reach(start: str, seen: set[str]) -> set[str]:
        for m in graph.get(start, ()):
            if m in graph and m not in seen:
                seen.add(m)
                reach(m, seen)
        return seen
    for m in graph:
        assert m not in reach(m, set()), f"{m} imports itself through {sorted(reach(m, set()))}"
