"""What a compiled kernel binary says about itself, read statically (no GPU): its entry's parameters,
registers, spills, shared memory (LDS), matrix instructions, and the occupancy they allow on a target.

A cubin (NVIDIA) and an hsaco (AMD) are both ELF files. The facts come from:
- cubin: `.nv.info` (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE per function) and `.nv.info.<kernel>`
  (EIATTR_KPARAM_INFO: each entry parameter's ordinal, offset, size and, for a pointer, its address space;
  this is the `.param` list of the PTX `.entry` ptxas compiled), `.nv.shared.<kernel>` (static shared
  memory), and the SASS from `nvdisasm` (Triton ships it in triton/backends/nvidia/bin): matrix
  instructions (HGMMA: wgmma; HMMA/IMMA: mma) and local-memory stores/loads (STL/LDL: spills).
- hsaco: the NT_AMDGPU_METADATA note (msgpack): `.amdhsa.kernels[]` with `.args` (`.size`, `.offset`,
  `.value_kind`), `.vgpr_count`, `.agpr_count`, `.sgpr_count`, `.vgpr_spill_count`, `.sgpr_spill_count`,
  `.group_segment_fixed_size` (LDS) and `.private_segment_fixed_size` (scratch); MFMA instructions are
  found by walking `.text` with the GFX9 (CDNA) encoding lengths (no AMD disassembler ships with Triton).
Triton's metadata JSON (next to each binary in the bundle) gives the dynamic shared memory the launch asks
for (`shared`) and the warps per program.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mlcc.bundle.manifest import KernelEntry, Manifest
from mlcc.emit.target.targets import Target, parse_target


class BinaryFormatError(ValueError):
    pass


# --- ELF -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Section:
    name: str
    type: int
    data: bytes
    link: int
    info: int


def elf_sections(data: bytes) -> dict[str, Section]:
    """The sections of a 64-bit little-endian ELF file by name."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise BinaryFormatError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    raw = []
    for i in range(shnum):
        name, typ, _flags, _addr, off, size, link, info = struct.unpack_from("<IIQQQQII", data, shoff + i * shentsize)
        body = b"" if typ == 8 else data[off:off + size]   # SHT_NOBITS has no bytes in the file
        raw.append((name, typ, body, link, info, size))
    strtab = raw[shstrndx][2]
    out = {}
    for name, typ, body, link, info, size in raw:
        label = strtab[name:strtab.index(b"\0", name)].decode()
        out[label] = Section(label, typ, body if typ != 8 else bytes(size), link, info)
    return out


def elf_symbols(sections: dict[str, Section]) -> list[str]:
    """Symbol names of .symtab in index order (nv.info records name functions by symbol index)."""
    symtab, strtab = sections.get(".symtab"), sections.get(".strtab")
    if symtab is None or strtab is None:
        return []
    names = []
    for off in range(0, len(symtab.data), 24):
        name, = struct.unpack_from("<I", symtab.data, off)
        names.append(strtab.data[name:strtab.data.index(b"\0", name)].decode())
    return names


# --- cubin: .nv.info ------------------------------------------------------------------------------------

EIATTR_FRAME_SIZE = 0x11
EIATTR_KPARAM_INFO = 0x17
EIATTR_REGCOUNT = 0x2F
EIFMT_SVAL = 0x04
PARAM_SPACE_GLOBAL = 0x4   # KPARAM_INFO's space of a `.ptr .global` parameter (every Triton pointer)


def nv_info_records(data: bytes) -> list[tuple[int, bytes | int]]:
    """(attribute, value) records of an .nv.info section: SVAL records carry bytes, the others an int."""
    out: list[tuple[int, bytes | int]] = []
    off = 0
    while off + 4 <= len(data):
        fmt, attr, val = struct.unpack_from("<BBH", data, off)
        off += 4
        if fmt == EIFMT_SVAL:
            out.append((attr, data[off:off + val]))
            off += val
        else:
            out.append((attr, val))
    return out


@dataclass(frozen=True)
class Param:
    """One parameter of a compiled kernel's entry, in order."""
    ordinal: int
    offset: int
    size: int          # bytes
    pointer: bool

    def describe(self) -> str:
        return f"{'pointer' if self.pointer else 'scalar'} of {self.size} bytes"


def cubin_params(sections: dict[str, Section], function: str) -> list[Param]:
    """The entry parameters of `function` from its EIATTR_KPARAM_INFO records, by ordinal."""
    info = sections.get(f".nv.info.{function}")
    if info is None:
        raise BinaryFormatError(f"no .nv.info.{function} section (is '{function}' the cubin's kernel?)")
    params = []
    for attr, value in nv_info_records(info.data):
        if attr == EIATTR_KPARAM_INFO and isinstance(value, bytes):
            _index, ordinal, offset, flags = struct.unpack_from("<IHHI", value)
            space = (flags >> 8) & 0xF
            params.append(Param(ordinal, offset, (flags >> 18) & 0x3FFF, space == PARAM_SPACE_GLOBAL))
    return sorted(params, key=lambda p: p.ordinal)


def cubin_function_attr(sections: dict[str, Section], function: str, attr: int) -> int | None:
    """A per-function value (registers, frame size) from the global .nv.info section."""
    info = sections.get(".nv.info")
    if info is None:
        return None
    symbols = elf_symbols(sections)
    for a, value in nv_info_records(info.data):
        if a == attr and isinstance(value, bytes) and len(value) >= 8:
            sym, v = struct.unpack_from("<II", value)
            if sym < len(symbols) and symbols[sym] == function:
                return v
    return None


# --- hsaco: the AMDGPU metadata note (msgpack) -----------------------------------------------------------

NT_AMDGPU_METADATA = 32


def msgpack_decode(data: bytes) -> Any:
    """Decode one msgpack object (the subset AMDGPU metadata uses: maps, arrays, strings, ints, floats, bools,
    nil, bin)."""
    value, _ = _unpack(data, 0)
    return value


def _unpack(b: bytes, i: int) -> tuple[Any, int]:
    t = b[i]
    i += 1
    if t <= 0x7F:
        return t, i
    if t >= 0xE0:
        return t - 0x100, i
    if 0x80 <= t <= 0x8F:
        return _unpack_map(b, i, t & 0x0F)
    if 0x90 <= t <= 0x9F:
        return _unpack_array(b, i, t & 0x0F)
    if 0xA0 <= t <= 0xBF:
        n = t & 0x1F
        return b[i:i + n].decode(), i + n
    fixed = {0xC0: None, 0xC2: False, 0xC3: True}
    if t in fixed:
        return fixed[t], i
    ints = {0xCC: "<B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q",
            0xCA: ">f", 0xCB: ">d"}
    if t in ints:
        fmt = ints[t]
        return struct.unpack_from(fmt, b, i)[0], i + struct.calcsize(fmt)
    lengths = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I", 0xC4: ">B", 0xC5: ">H", 0xC6: ">I"}
    if t in lengths:
        n, = struct.unpack_from(lengths[t], b, i)
        i += struct.calcsize(lengths[t])
        raw = b[i:i + n]
        return (raw.decode() if t >= 0xD9 else raw), i + n
    if t in (0xDC, 0xDD, 0xDE, 0xDF):
        fmt = ">H" if t in (0xDC, 0xDE) else ">I"
        n, = struct.unpack_from(fmt, b, i)
        i += struct.calcsize(fmt)
        return (_unpack_array if t in (0xDC, 0xDD) else _unpack_map)(b, i, n)
    raise BinaryFormatError(f"msgpack type 0x{t:02x} at byte {i - 1} is not supported")


def _unpack_array(b: bytes, i: int, n: int) -> tuple[list[Any], int]:
    out = []
    for _ in range(n):
        v, i = _unpack(b, i)
        out.append(v)
    return out, i


def _unpack_map(b: bytes, i: int, n: int) -> tuple[dict[Any, Any], int]:
    out = {}
    for _ in range(n):
        k, i = _unpack(b, i)
        v, i = _unpack(b, i)
        out[k] = v
    return out, i


def hsaco_metadata(sections: dict[str, Section]) -> dict[str, Any]:
    """The AMDGPU metadata map of an hsaco (from its NT_AMDGPU_METADATA note)."""
    for sec in sections.values():
        if sec.type != 7:   # SHT_NOTE
            continue
        off, data = 0, sec.data
        while off + 12 <= len(data):
            namesz, descsz, typ = struct.unpack_from("<III", data, off)
            name_off = off + 12
            desc_off = name_off + (namesz + 3) // 4 * 4
            if typ == NT_AMDGPU_METADATA and data[name_off:name_off + namesz].rstrip(b"\0") == b"AMDGPU":
                return msgpack_decode(data[desc_off:desc_off + descsz])
            off = desc_off + (descsz + 3) // 4 * 4
    raise BinaryFormatError("no AMDGPU metadata note")


def hsaco_kernel(meta: dict[str, Any], function: str) -> dict[str, Any]:
    for k in meta.get("amdhsa.kernels", []):
        if k.get(".name") == function or k.get(".symbol") == f"{function}.kd":
            return k
    raise BinaryFormatError(f"the hsaco's metadata has no kernel '{function}'")


def hsaco_params(kernel_meta: dict[str, Any]) -> list[Param]:
    """The explicit arguments of an AMD kernel descriptor (hidden_* arguments are the runtime's, not the
    launcher's), in order."""
    params = []
    for a in kernel_meta.get(".args", []):
        kind = a.get(".value_kind", "")
        if kind.startswith("hidden_"):
            continue
        params.append(Param(len(params), a[".offset"], a[".size"], kind == "global_buffer"))
    return params


# --- matrix instructions --------------------------------------------------------------------------------

# The SASS opcodes of NVIDIA's matrix units: HGMMA/IGMMA/QGMMA/BGMMA are wgmma (sm_90 warpgroup MMA),
# HMMA/IMMA/DMMA/BMMA are mma (warp MMA, sm_70+).
WGMMA_OPCODES = ("HGMMA", "IGMMA", "QGMMA", "BGMMA")
MMA_OPCODES = ("HMMA", "IMMA", "DMMA", "BMMA")
_SASS_OPCODE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Za-z0-9_]+)*)")


def nvidia_tool(name: str) -> Path | None:
    """A CUDA binary tool Triton ships (cuobjdump, nvdisasm, ptxas), else one on PATH."""
    try:
        import triton
        p = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
        if p.is_file():
            return p
    except ImportError:
        pass
    found = shutil.which(name)
    return Path(found) if found else None


def sass_opcodes(cubin: Path) -> list[tuple[str, str]] | None:
    """(opcode, modifiers) of every SASS instruction of a cubin, by nvdisasm; None without nvdisasm."""
    tool = nvidia_tool("nvdisasm")
    if tool is None:
        return None
    text = subprocess.run([str(tool), "-c", str(cubin)], check=True, capture_output=True, text=True).stdout
    return [(m.group(1), m.group(2)) for m in _SASS_OPCODE.finditer(text)]


def local_bytes(modifiers: str) -> int:
    """Bytes one STL/LDL moves: .64 and .128 widen the 32-bit default; .U8/.S16 etc. narrow it."""
    for width in ("128", "64", "32", "16", "8"):
        if re.search(rf"\.[US]?{width}\b", modifiers):
            return int(width) // 8
    return 4


# GFX9/CDNA instruction lengths by the top bits of the first dword. The MAI (MFMA) instructions are VOP3P
# (0b110100111) with op 0x40-0x7f (gfx90a/gfx94x), less the accumulator-register moves, plus gfx940's xf32
# (0x3e, 0x3f) and gfx950's f16/bf16 32x16 forms (0x35-0x37); the other VOP3P ops (v_pk_*, v_dot*,
# v_fma_mix*) are below 0x35. Checked against Triton's amdgcn text in tests/emit/test_binaries.py.
_GFX9_64BIT_PREFIXES = (0b110000, 0b110001, 0b110100, 0b110110, 0b110111, 0b111000, 0b111010, 0b111100)
_MFMA_OPS = frozenset(range(0x35, 0x80)) - {0x58, 0x59}   # v_accvgpr_read_b32, v_accvgpr_write_b32


def gfx9_mfma_count(text: bytes) -> int:
    """MFMA instructions in a GFX9 (gfx90a/gfx94x) code section, by a linear walk over the encodings."""
    count, i = 0, 0
    while i + 4 <= len(text):
        w, = struct.unpack_from("<I", text, i)
        top6 = w >> 26
        if w >> 31 == 0:                                   # VOP2 / VOP1 / VOPC
            src0 = w & 0x1FF
            op2 = (w >> 25) & 0x3F
            literal = src0 in (0xFF, 0xF9, 0xFA) or (w >> 25 != 0x3F and w >> 25 != 0x3E and
                                                        op2 in (0x17, 0x18, 0x24, 0x25))
            i += 8 if literal else 4
        elif top6 in _GFX9_64BIT_PREFIXES:
            if w >> 23 == 0b110100111 and ((w >> 16) & 0x7F) in _MFMA_OPS:
                count += 1
            i += 8
        elif w >> 30 == 0b10:                              # SOP2 / SOPK / SOP1 / SOPC / SOPP
            literal = False
            if w >> 23 == 0b101111101:                     # SOP1
                literal = (w & 0xFF) == 0xFF
            elif w >> 23 in (0b101111110,):                # SOPC
                literal = (w & 0xFF) == 0xFF or ((w >> 8) & 0xFF) == 0xFF
            elif w >> 28 == 0b1011:                        # SOPK (s_setreg_imm32_b32 carries a literal)
                literal = ((w >> 23) & 0x1F) == 0x14
            elif w >> 23 != 0b101111111:                   # SOP2
                literal = (w & 0xFF) == 0xFF or ((w >> 8) & 0xFF) == 0xFF
            i += 8 if literal else 4
        else:                                              # VINTRP and anything unknown: one dword
            i += 4
    return count


# --- one binary's facts -----------------------------------------------------------------------------------

@dataclass
class BinaryFacts:
    target: str
    function: str
    params: list[Param]
    registers: int | None          # 32-bit registers per thread (VGPRs on AMD; arch + accumulation)
    spill_stores: int | None       # bytes (NVIDIA: STL bytes; AMD: spilled VGPRs * 4 per lane; SGPR spills go
                                   # to VGPR lanes, not memory: extra["sgpr_spills"])
    spill_loads: int | None        # bytes (NVIDIA: LDL bytes; AMD: None, the metadata counts only stores)
    shared: int                    # bytes of shared memory / LDS one program uses
    num_warps: int
    wgmma: int | None = None       # instruction counts; None: not readable here (no nvdisasm)
    mma: int | None = None
    mfma: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def spilled_bytes(self) -> int | None:
        if self.spill_stores is None:
            return None
        return self.spill_stores + (self.spill_loads or 0)

    @property
    def matrix_instructions(self) -> list[str]:
        names = [("wgmma", self.wgmma), ("mma", self.mma), ("mfma", self.mfma)]
        return [n for n, c in names if c]

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["params"] = [asdict(p) for p in self.params]
        d["spilled_bytes"] = self.spilled_bytes
        d["matrix_instructions"] = self.matrix_instructions
        return d


def read_binary(path: Path, target: Target, function: str, metadata: dict[str, Any], *,
                disassemble: bool = True) -> BinaryFacts:
    """The facts of one bundled binary. `metadata` is Triton's metadata JSON next to it."""
    data = path.read_bytes()
    sections = elf_sections(data)
    num_warps = int(metadata.get("num_warps", 4))
    dynamic_shared = int(metadata.get("shared", 0))
    if target.binary_format == "cubin":
        static = sections.get(f".nv.shared.{function}")
        facts = BinaryFacts(target.name, function, cubin_params(sections, function),
                            cubin_function_attr(sections, function, EIATTR_REGCOUNT), None, None,
                            dynamic_shared + (len(static.data) if static else 0), num_warps)
        facts.extra["frame_bytes"] = cubin_function_attr(sections, function, EIATTR_FRAME_SIZE)
        ops = sass_opcodes(path) if disassemble else None
        if ops is not None:
            facts.spill_stores = sum(local_bytes(m) for o, m in ops if o == "STL")
            facts.spill_loads = sum(local_bytes(m) for o, m in ops if o == "LDL")
            facts.wgmma = sum(1 for o, _ in ops if o in WGMMA_OPCODES)
            facts.mma = sum(1 for o, _ in ops if o in MMA_OPCODES)
            facts.extra["matrix_opcodes"] = sorted({o for o, _ in ops if o in WGMMA_OPCODES + MMA_OPCODES})
            # with their shape and operand types: QGMMA.64x64x32.F32.E5M2.E4M3 (e5m2 x e4m3fn fp8 wgmma)
            facts.extra["matrix_forms"] = sorted({o + m for o, m in ops if o in WGMMA_OPCODES + MMA_OPCODES})
        return facts
    meta = hsaco_kernel(hsaco_metadata(sections), function)
    vgpr_spill = int(meta.get(".vgpr_spill_count", 0))
    sgpr_spill = int(meta.get(".sgpr_spill_count", 0))
    text = sections.get(".text")
    facts = BinaryFacts(target.name, function, hsaco_params(meta), int(meta.get(".vgpr_count", 0)),
                        vgpr_spill * 4, None,
                        max(int(meta.get(".group_segment_fixed_size", 0)), dynamic_shared), num_warps,
                        mfma=gfx9_mfma_count(text.data) if text is not None else None)
    facts.extra.update({"agprs": meta.get(".agpr_count"), "sgprs": meta.get(".sgpr_count"),
                        "vgpr_spills": vgpr_spill, "sgpr_spills": sgpr_spill,
                        "private_bytes": meta.get(".private_segment_fixed_size")})
    return facts


# --- occupancy ------------------------------------------------------------------------------------------

def _round_up(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def occupancy(facts: BinaryFacts, target: Target) -> dict[str, Any]:
    """Resident warps (wavefronts) per SM (CU) and the limiting resource, under target's figures.

    NVIDIA: registers are allocated per warp in units of `register_granule` from `register_file` per SM;
    shared memory per program plus the 1 KiB the driver reserves per block (sm_80+) from `sm_shared_bytes`;
    at most `sm_max_warps` warps and `sm_max_blocks` programs. AMD: VGPRs per lane in units of
    `register_granule` out of `register_file` per SIMD, waves spread over `simds` SIMDs; LDS per CU."""
    w = max(1, facts.num_warps)
    limits: dict[str, int] = {"warps": target.sm_max_warps // w, "blocks": target.sm_max_blocks}
    if facts.registers:
        if target.vendor == "nvidia":
            per_warp = _round_up(facts.registers * target.warp_size, target.register_granule)
            limits["registers"] = (target.register_file // per_warp) // w
        else:
            waves_per_simd = min(target.sm_max_warps // target.simds,
                                 target.register_file // _round_up(facts.registers, target.register_granule))
            limits["registers"] = (waves_per_simd * target.simds) // w
    per_block = facts.shared + target.shared_reserved_per_block
    if per_block:
        limits["shared"] = target.sm_shared_bytes // per_block
    blocks = max(0, min(limits.values()))
    limiting = min(limits, key=lambda k: limits[k])
    warps = blocks * w
    return {"blocks_per_sm": blocks, "warps_per_sm": warps, "occupancy": round(warps / target.sm_max_warps, 4),
            "limited_by": limiting}


# --- a bundle's binaries ---------------------------------------------------------------------------------

def load_manifest(bundle: Path) -> Manifest:
    return Manifest.from_json(json.loads((Path(bundle) / "manifest.json").read_text()))


def bundle_facts(bundle: Path, kernel: KernelEntry, target: str, *, disassemble: bool = True) -> BinaryFacts:
    """The facts of kernel's binary for target in a bundle directory."""
    entry = kernel.binaries[target]
    metadata = json.loads((Path(bundle) / entry.metadata).read_text())
    return read_binary(Path(bundle) / entry.path, parse_target(target), entry.function, metadata,
                       disassemble=disassemble)


def binary_rows(bundle: Path, manifest: Manifest | None = None) -> list[dict[str, Any]]:
    """One row per kernel and target: registers, spills, shared memory, occupancy, matrix instructions."""
    manifest = manifest or load_manifest(bundle)
    rows = []
    for kernel in manifest.kernels:
        for target in sorted(kernel.binaries):
            facts = bundle_facts(bundle, kernel, target)
            constexprs = (kernel.binaries[target].config or kernel.gpu).constexprs
            tile = [constexprs[b] for b in ("BLOCK_M", "BLOCK_N", "BLOCK_K") if b in constexprs]
            row = {"kernel": kernel.name, "template": kernel.template, "tile": "x".join(map(str, tile)),
                   **facts.to_json(), **occupancy(facts, parse_target(target))}
            rows.append(row)
    return rows


def spill_warnings(bundle: Path, manifest: Manifest | None = None) -> list[str]:
    """One line per kernel and target whose binary spills registers. Fast enough for every compile: a cubin
    is disassembled only when it has a local-memory frame (EIATTR_FRAME_SIZE; a frame may also be dead
    stack, so the STL/LDL count decides), an hsaco's metadata counts its spills."""
    manifest = manifest or load_manifest(bundle)
    lines = []
    for kernel in manifest.kernels:
        for target in sorted(kernel.binaries):
            facts = bundle_facts(bundle, kernel, target, disassemble=False)
            if facts.extra.get("frame_bytes"):
                facts = bundle_facts(bundle, kernel, target)
            if facts.spilled_bytes:
                loads = f", {facts.spill_loads} bytes loaded" if facts.spill_loads is not None else ""
                lines.append(f"warning: kernel {kernel.name} [{target}] spills registers: {facts.spill_stores} "
                             f"bytes stored{loads} ({facts.registers} registers)")
    return lines
