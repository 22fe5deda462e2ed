"""mlcc.compile: model file in, bundle directory out.

frontend (ONNX, StableHLO, or the IR's own text) -> the pipeline's phases
(mlcc/pipeline.py: simplify, recognize, precision, layouts, fusion, schedule,
buffers; verified after every pass) -> one kernel per launching instruction,
from templates, each distinct kernel once -> AOT binaries per target (parallel,
cached) -> bundle, written beside the target and swapped in only when complete.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from mlcc.atomic import depfile_text, staged_directory, write_file_atomic
from mlcc.bundle.digest import bundle_digest, file_sha256
from mlcc.emit.check_numerics import check_numerics
from mlcc.emit.codegen.kernel import Kernel
from mlcc.emit.codegen.lower_module import lower_module, tilings
from mlcc.emit.target.binaries import spill_warnings
from mlcc.emit.target.build import build_binaries, default_cache_dir
from mlcc.emit.codegen.triton_types import fp8_operand_types
from mlcc.emit.target.targets import TARGETS, Target, TargetError, device_model, parse_target, parse_targets
from mlcc.emit.target.tuning_db import TuningDb, load_tuning_db
from mlcc.emit.tiling import untuned
from mlcc.emit.writer import write_bundle
from mlcc.errors import InputMissingError, InvalidInputError, MlccError, OutputError, UnsupportedError, UsageError
from mlcc.frontend.hlo_text import import_hlo_text, is_hlo_text
from mlcc.frontend.onnx import import_onnx
from mlcc.frontend.onnx.symbolic_values import UNBOUNDED
from mlcc.frontend.stablehlo import import_stablehlo
from mlcc.hlo.ir import MAX_VALUE_BYTES, Instruction, Module
from mlcc.hlo.passes.unfused import unfused_stats
from mlcc.hlo.passes.layout_assignment import layout_conversions
from mlcc.hlo.passes.pass_manager import Pipeline, PipelineOptions
from mlcc.hlo.symbolic import DEFAULT_SIZE, symbols_of
from mlcc.hlo.traffic import kernel_bytes
from mlcc.frontend.onnx.quantize_static import quantize_static_int8
from mlcc.hlo.passes.quantize_weights import SCHEMES, is_static_int8, parse_scheme
from mlcc.hlo.shape_inference import FP8_DOT
from mlcc.pipeline import check_disabled, compile_pipeline
from mlcc.version import __version__

BYTECODE_MAGIC = b"ML\xefR"


@dataclass
class CompileOptions:
    targets: list[str] = field(default_factory=lambda: ["sm_80", "sm_90"])
    shapes: dict[str, list[Any]] = field(default_factory=dict)   # input name or dim name -> dims / size
    disable_passes: list[str] = field(default_factory=list)
    dump_ir: str | None = None
    time_passes: bool = False
    jobs: int = 0
    cache_dir: str | None = None       # None: the user's cache directory; "" disables the cache
    force: bool = False
    depfile: str | None = None
    quiet: bool = False
    config_file: str | None = None     # mlcc.yaml the options came from (hashed as an input)
    device_model: str = "H100"         # what intent.json's costs assume (H100, H200, A100)
    check_numerics: bool = False       # run every kernel under the interpreter against the reference evaluator
    precision: str = "fp32"            # fp32 | tf32 | fp16 | bf16: the type weights are stored and activations computed in
    io_layout: str = "row-major"       # row-major: inputs and outputs as ONNX/StableHLO define; any: the compiler's choice
    tuning_db: str | None = None       # YAML of measured launch configs by kernel signature and target (mlcc tune)
    require_tuned: bool = False        # a tunable (kernel, target) without a tuning entry is an error
    werror_spills: bool = False        # a binary that spills registers is an error (exit 69), not a warning
    quantize: str | None = None        # w4[:BLOCK]: weight-only 4-bit quantization of float weights (--quantize);
                                       # int8: static int8 QDQ calibrated on `calibration` (.npz by input name)
    calibration: str | None = None     # --calibration: hashed as an input of the build, not recorded as an option
    fp8: str = "upcast"                # fp8 contractions of types a target's tensor cores lack: upcast (f16) | strict

    def effective(self) -> dict[str, Any]:
        """The options that change the bundle's bytes (recorded in the manifest, part of the up-to-date check)."""
        return {"targets": list(self.targets), "shapes": {k: list(v) if isinstance(v, (list, tuple)) else v
                                                          for k, v in sorted(self.shapes.items())},
                "disable_passes": sorted(self.disable_passes), "device_model": self.device_model,
                "precision": self.precision, "io_layout": self.io_layout, "require_tuned": bool(self.require_tuned),
                **({"quantize": self.quantize} if self.quantize else {}),
                **({"fp8": self.fp8} if self.fp8 != "upcast" else {})}


@dataclass
class CompileResult:
    out_dir: Path
    manifest: dict[str, Any]
    up_to_date: bool = False
    pass_records: list[Any] = field(default_factory=list)
    module: Module | None = None
    build_stats: dict[str, Any] = field(default_factory=dict)
    fusion_explanations: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)   # one line per kernel and target that spills


def tool_versions() -> dict[str, str]:
    import onnx
    import triton
    return {"mlcc": __version__, "triton": triton.__version__, "onnx": onnx.__version__}


def detect_format(path: Path) -> str:
    with open(path, "rb") as f:
        head = f.read(64)
    if head.startswith(BYTECODE_MAGIC):
        return "stablehlo-bytecode"
    if is_hlo_text(path, head):
        return "hlo"
    if path.suffix in (".mlir", ".stablehlo") or head.lstrip().startswith((b"module", b"func.func", b"#loc", b"\"builtin.module\"")):
        return "stablehlo"
    return "onnx"


def import_model(model: Any, options: CompileOptions) -> tuple[Module, dict[str, Any], list[Path]]:
    """The model as IR, a description of it for the manifest, and the files it was read from."""
    import onnx  # third-party and slow to import: only when compiling
    if isinstance(model, onnx.ModelProto):
        data = model.SerializeToString(deterministic=True)
        if is_static_int8(options.quantize):
            model = quantize_static_int8(model, options.calibration, model.graph.name or "model")
            data += Path(options.calibration).read_bytes()
        module = import_onnx(model, shapes=_fixed_shapes(options) or None, dim_ranges=_dim_ranges(options))
        return module, {"file": None, "format": "onnx", "sha256": hashlib.sha256(data).hexdigest()}, []
    path = Path(os.fspath(model))
    if not path.exists():
        raise InputMissingError("no such file", file=str(path))
    if not path.is_file():
        raise InvalidInputError("not a regular file", file=str(path))
    fmt = detect_format(path)
    deps = [path]
    if is_static_int8(options.quantize):
        if fmt != "onnx":
            raise UnsupportedError("--quantize int8 takes an ONNX model (it calibrates and rewrites its graph)",
                                   file=path.name)
        quantized = quantize_static_int8(onnx.load(path), options.calibration, path.name)
        with tempfile.TemporaryDirectory(prefix="mlcc-int8-") as tmp:
            # imported from a file of the model's name, as an imported QDQ model is (the same IR; errors name it)
            onnx.save(quantized, Path(tmp) / path.name, save_as_external_data=quantized.ByteSize() > 2**31 - 2**24)
            module = import_onnx(Path(tmp) / path.name, shapes=_fixed_shapes(options) or None,
                                 dim_ranges=_dim_ranges(options))
        deps.append(Path(options.calibration))
    elif fmt == "onnx":
        module = import_onnx(path, shapes=_fixed_shapes(options) or None, dim_ranges=_dim_ranges(options))
    elif fmt == "hlo":  # the IR's text, e.g. a bundle's model.hlo (weights from the weights.bin beside it)
        module = import_hlo_text(path)
    else:
        module = import_stablehlo(path)
    deps += module.source_files
    info = {"file": path.name, "format": fmt, "sha256": file_sha256(path)}
    return module, info, deps


def _fixed_shapes(options: CompileOptions) -> dict[str, list[Any]]:
    """--shape entries that fix sizes (NAME=1x128, or a dim name with one size)."""
    return {k: v for k, v in (options.shapes or {}).items() if not isinstance(v, str)}


def _dim_ranges(options: CompileOptions) -> dict[str, tuple[int, int]]:
    """--shape entries that keep a symbolic dim with a range of sizes (seq=1..64), or with a lowest size and no
    upper end (seq=1..: the range's top is UNBOUNDED, which the importer reads as no top), or bound a
    data-dependent one (nonzero_0=..100, MIN 0)."""
    ranges = {}
    for name, spec in (options.shapes or {}).items():
        if isinstance(spec, str):
            lo, sep, hi = spec.partition("..")
            try:
                ranges[name] = (int(lo) if lo.strip() else 0,  # ..MAX: from 0 (a data-dependent dim's bound)
                                int(hi) if hi.strip() else UNBOUNDED)
            except ValueError:
                raise UnsupportedError(f"--shape {name}={spec}: a range of sizes is MIN..MAX, e.g. 1..128, "
                                       f"or MIN.. for no upper end") from None
            if not sep or not 0 <= ranges[name][0] <= ranges[name][1]:
                raise UnsupportedError(f"--shape {name}={spec}: a range of sizes is MIN..MAX with 0 <= MIN <= MAX")
    return ranges


def _input_records(deps: list[Path], options: CompileOptions, model_sha256: str) -> list[dict[str, str]]:
    """What the bundle was built from: the model's files (or the in-memory model's hash), the options file and
    the tuning database."""
    records = [{"file": p.name, "sha256": file_sha256(p)} for p in deps] or [{"file": None, "sha256": model_sha256}]
    for extra in (options.config_file, options.tuning_db):
        if extra:
            records.append({"file": Path(extra).name, "sha256": file_sha256(Path(extra))})
    return records


def _build_key(records: list[dict[str, str]], options: CompileOptions) -> str:
    payload = {"inputs": records, "options": options.effective(), "versions": tool_versions()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _is_up_to_date(out_dir: Path, key: str) -> dict[str, Any] | None:
    try:
        manifest = json.loads((out_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("build", {}).get("key") != key:
        return None
    if manifest.get("bundle_sha256") != bundle_digest(out_dir):
        return None  # the bundle was edited or damaged since: rebuild
    return manifest


def _write_depfile(options: CompileOptions, out_dir: Path, deps: list[Path]) -> None:
    if not options.depfile:
        return
    files = [str(p) for p in deps] + [f for f in (options.config_file, options.tuning_db) if f]
    write_file_atomic(Path(options.depfile), depfile_text(str(out_dir / "manifest.json"), files))


Progress = Callable[[str, int, int], None]


def compile(model: Any, out_dir: str | os.PathLike, progress: Progress | None = None, **kwargs: Any) -> CompileResult:
    """Compile model (a path to .onnx / .mlir, or an onnx.ModelProto) into a bundle at out_dir."""
    options = kwargs.pop("options", None) or CompileOptions()
    for k, v in kwargs.items():
        if not hasattr(options, k):
            raise TypeError(f"unknown compile option '{k}'")
        if v is None and k == "shapes":  # shapes=None: none given, as the default
            continue
        setattr(options, k, v)
    try:
        try:
            return _compile(model, Path(out_dir), options, progress)
        finally:
            gc.unfreeze()  # the imported module, frozen by _compile, is the collector's to scan again
    except MlccError:
        raise
    except RecursionError as e:
        raise InvalidInputError(f"model nesting too deep ({e})") from None
    except MemoryError:
        raise InvalidInputError("out of memory while compiling (model too large for this machine?)") from None


def _plan_unranged_symbols(module: Module) -> None:
    """An input's symbolic dim given neither a size nor a range takes any size at run time (0 up, as the
    importer already assumed), or from the lowest size --shape seq=MIN.. gives: it is planned at DEFAULT_SIZE
    (tiles; at MIN if larger), named in module.unbounded, and the sizes of its buffers and their arena offsets
    stay expressions."""
    for name, (lo, hi) in list(module.symbols.items()):
        if hi >= UNBOUNDED:  # --shape seq=1..: a lowest size, no upper end
            module.symbols[name] = (lo, max(lo, DEFAULT_SIZE))
            module.unbounded.add(name)
    for inst in module.entry.instructions:
        if inst.opcode != "parameter" or inst.shape.is_static:
            continue
        for d in symbols_of(inst.shape.dims):
            if d not in module.symbols:
                module.symbols[d] = (0, DEFAULT_SIZE)
                module.unbounded.add(d)


def _require_possible_sizes(module: Module, file: str | None) -> None:
    """A value no device could hold (more than MAX_VALUE_BYTES at the top of its symbols' ranges) is invalid
    input, whichever frontend made it: the ONNX importer names its tensor already; this catches the rest."""
    for inst in module.all_instructions():
        for shape in inst.shape.elements if inst.shape.is_tuple else [inst.shape]:
            size = shape.upper_nbytes(module.symbols)
            if size > MAX_VALUE_BYTES:
                what = f"'{inst.origin[0]}'" if inst.origin else f"%{inst.name}"
                raise InvalidInputError(f"value {what} of type {shape} needs {size} bytes, more than 2**48 "
                                        f"(256 TiB, more than any device addresses)", file=file)


def _checked_options(options: CompileOptions):
    """The targets, the device model and the pass pipeline the options name; UnsupportedError if one is unknown."""
    try:  # an empty target list builds a bundle without binaries (CPU interpreter, or JIT on a GPU)
        targets = parse_targets([t for t in options.targets if t.strip().lower() != "none"])
    except TargetError as e:
        raise UnsupportedError(str(e)) from None
    try:
        device = device_model(options.device_model)
    except ValueError as e:
        raise UnsupportedError(str(e)) from None
    if options.precision not in ("fp32", "tf32", "fp16", "bf16"):
        raise UnsupportedError(f"unknown precision '{options.precision}' (fp32, tf32, fp16, bf16)")
    if options.io_layout not in ("row-major", "any"):
        raise UnsupportedError(f"unknown --io-layout '{options.io_layout}' (row-major, any)")
    if options.fp8 not in FP8_POLICIES:
        raise UsageError(f"unknown --fp8 policy '{options.fp8}' ({', '.join(FP8_POLICIES)})")
    if (options.quantize is not None and parse_scheme(str(options.quantize)) is None
            and not is_static_int8(options.quantize)):
        raise UsageError(f"unknown --quantize scheme '{options.quantize}' (schemes: {SCHEMES})")
    if is_static_int8(options.quantize) and not options.calibration:
        raise UsageError("--quantize int8 needs --calibration FILE (an .npz of sample inputs by input name)")
    if options.calibration and not is_static_int8(options.quantize):
        raise UsageError("--calibration is for --quantize int8")
    pipeline = compile_pipeline(options.precision, options.io_layout, options.quantize)
    check_disabled(pipeline, options.disable_passes)
    return targets, device, pipeline


def load_tuning(options: CompileOptions) -> TuningDb | None:
    """The tuning database the options name (checked: exit 65 or 66 naming it), or None."""
    if not options.tuning_db:
        return None
    return load_tuning_db(options.tuning_db, tilings())


def _run_phases(module: Module, pipeline: Pipeline, options: CompileOptions,
                on_pass: Callable[[str, int], None] | None = None) -> None:
    """The pipeline's phases the module still needs (mlcc/pipeline.py), each pass verified."""
    pipeline.run(module, PipelineOptions(dump_dir=Path(options.dump_ir) if options.dump_ir else None,
                                         disabled=frozenset(options.disable_passes), on_pass=on_pass))


def _require_tuned(kernels: dict[str, Kernel], targets: list[Target], tuning: TuningDb | None) -> None:
    """--require-tuned: every tunable (kernel, target) must have a tuning entry; list every one that has not."""
    misses = untuned([kernels[n] for n in sorted(kernels)], targets)
    if misses:
        listed = "; ".join(f"{k.name} ({k.template}) on {t.name}, signature {k.signature}" for k, t in misses)
        where = f"in {tuning.path}" if tuning is not None else "(no --tuning-db given)"
        raise UnsupportedError(f"--require-tuned: {len(misses)} kernel launch config(s) have no tuning entry "
                               f"{where}: {listed}")


def lower_model(model: Any, options: CompileOptions,
                targets: list[Target]) -> tuple[Module, dict[str, Kernel], list[tuple[Instruction, str]]]:
    """The model's module, kernels and launches as a compile with options builds them, configured for
    targets by the heuristics alone (what `mlcc tune` measures against); nothing is written."""
    _, _, pipeline = _checked_options(options)
    module, _, _ = import_model(model, options)
    _plan_unranged_symbols(module)
    pipeline.run(module, PipelineOptions(disabled=frozenset(options.disable_passes)))
    kernels, launches = lower_module(module, module.buffer_plan, targets, None)
    return module, kernels, launches


def _compile(model: Any, out_dir: Path, options: CompileOptions, progress: Progress | None) -> CompileResult:
    report = progress or (lambda stage, done, total: None)
    targets, device, pipeline = _checked_options(options)
    tuning = load_tuning(options)

    report("import", 0, 1)
    module, model_info, deps = import_model(model, options)
    report("import", 1, 1)
    # The imported module lives until the bundle is written: keep the cyclic garbage collector from scanning its
    # objects again at every full collection (on a 1,000-layer graph that scanning grew faster than the graph).
    gc.freeze()
    _plan_unranged_symbols(module)
    _require_possible_sizes(module, model_info.get("file"))
    records = _input_records(deps, options, model_info["sha256"])
    key = _build_key(records, options)
    if not options.force:
        manifest = _is_up_to_date(out_dir, key)
        if manifest is not None:
            # Same bytes, fresh mtime: make sees the bundle as newer than the input it was checked against.
            os.utime(out_dir / "manifest.json")
            _write_depfile(options, out_dir, deps)
            return CompileResult(out_dir, manifest, up_to_date=True,
                                 warnings=_fp8_upcasts(_manifest_fp8(manifest, out_dir), options)
                                 + _spills(out_dir, options))

    module.analyses.unfused = unfused_stats(module)  # the baseline: the model as imported, one kernel per op
    report("passes", 0, 1)
    _run_phases(module, pipeline, options, on_pass=lambda name, ran: report(f"pass:{name}", ran, 0))
    report("passes", 1, 1)
    plan = module.buffer_plan
    report("lowering", 0, 1)
    kernels, launches = lower_module(module, plan, targets, tuning)
    report("lowering", 1, 1)
    if options.require_tuned:
        _require_tuned(kernels, targets, tuning)
    fp8_lines = _fp8_upcasts([(k.name, t.name, fp8_operand_types(k.source)) for k in kernels.values()
                              for t in targets if k.config_for(t).constexprs.get("FP8_DOT") == 0], options)
    if options.check_numerics:
        report("numerics", 0, len(launches))
        check_numerics(module, kernels, launches)
        report("numerics", len(launches), len(launches))
    cache = None if options.cache_dir == "" else Path(options.cache_dir) if options.cache_dir else default_cache_dir()
    binaries, build_stats = build_binaries(list(kernels.values()), targets, jobs=options.jobs, cache_dir=cache,
                                           progress=lambda d, t: report("kernels", d, t))
    conversions, conversion_bytes = layout_conversions(module)
    moved = sum(sum(kernel_bytes(inst, module.symbols)) for inst, _ in launches)
    stats = {"kernels": len(kernels), "launches": len(launches),
             "instructions": sum(1 for _ in module.all_instructions()),
             "flops": sum(kernels[k].flops for _, k in launches),
             "bytes": moved,  # modeled global-memory traffic: each launch reads its inputs, writes its output once
             "unfused": module.analyses.unfused.to_json() if module.analyses.unfused else {},
             "layout_conversions": {"count": conversions, "bytes": conversion_bytes}}
    build_info = {"key": key, "inputs": records, "options": options.effective(), "versions": tool_versions()}
    try:
        with staged_directory(out_dir) as tmp:
            manifest = write_bundle(tmp, module=module, plan=plan, kernels=kernels, launches=launches,
                                    binaries=binaries, targets=targets, model_info=model_info,
                                    build_info=build_info, stats=stats, device=device,
                                    progress=lambda done, total: report("weights", done, total))
    except OSError as e:  # a full disk, a file size limit, a read-only folder: the previous bundle stays
        raise OutputError(f"cannot write the bundle: {e.strerror or e}", file=str(out_dir)) from None
    _write_depfile(options, out_dir, deps)
    return CompileResult(out_dir, manifest, pass_records=pipeline.records, module=module, build_stats=build_stats,
                         fusion_explanations=list(module.analyses.fusion_explanations),
                         warnings=fp8_lines + _spills(out_dir, options))


FP8_POLICIES = ("upcast", "strict")


def _manifest_fp8(manifest: dict[str, Any], out_dir: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    """(kernel, target, fp8 types) of a bundle's fp8 contractions built without fp8 tensor cores."""
    found = []
    for k in manifest["kernels"]:
        upcast = [t for t, b in sorted(k.get("binaries", {}).items()) if b["config"]["constexprs"].get("FP8_DOT") == 0]
        if upcast:
            types = fp8_operand_types((out_dir / k["source"]).read_text())
            found += [(k["name"], t, types) for t in upcast]
    return found


def _fp8_upcasts(upcast: list[tuple[str, str, tuple[str, ...]]], options: CompileOptions) -> list[str]:
    """The fp8 contraction kernels (kernel, target, their fp8 types) multiply in f16 where the target's tensor
    cores do not take their types (FP8_DOT 0: templates/_fp8_dot.jinja), exactly: one warning line; with
    --fp8 strict, UnsupportedError. Targets lacking the same types share a clause: "sm_80 has no e4m3fn or
    e5m2 tensor cores and sm_90 has no e4m3fnuz tensor cores"."""
    if not upcast:
        return []
    by_target: dict[str, set[str]] = {}
    for _, t, types in upcast:  # the types the target lacks (a mixed e4m3fn x e4m3fnuz kernel on sm_90: e4m3fnuz)
        by_target.setdefault(t, set()).update(set(types) - set(parse_target(t).fp8_dot) or types)
    by_types: dict[tuple[str, ...], list[str]] = {}
    for t in sorted(by_target):
        by_types.setdefault(tuple(x for x in FP8_DOT if x in by_target[t]), []).append(t)
    lacking = " and ".join(f"{', '.join(ts)} {'has' if len(ts) == 1 else 'have'} no "
                           f"{' or '.join(x[2:] for x in types)} tensor cores" for types, ts in by_types.items())
    kernels = sorted({k for k, _, _ in upcast})
    if options.fp8 == "strict":
        having = "; ".join(f"{t.name}: {', '.join(x[2:] for x in t.fp8_dot)}" for t in TARGETS.values() if t.fp8_dot)
        raise UnsupportedError(f"--fp8 strict: {lacking} for the {len(kernels)} fp8 contraction kernels "
                               f"({kernels[0]}, ...); build for a target whose tensor cores take them ({having}), "
                               f"or let them multiply in f16 (--fp8 upcast)")
    values = "/".join(F8_SHORT.get(x, x[2:]) for x in FP8_DOT if any(x in s for s in by_target.values()))
    return [f"warning: {lacking}: {len(kernels)} fp8 contraction kernels multiply in f16 there (exact: every "
            f"{values} value is an f16 value; f32 sums)"]


F8_SHORT = {"f8e4m3fn": "e4m3"}  # the warning's name of the values (the others by their type's)


def _spills(out_dir: Path, options: CompileOptions) -> list[str]:
    """The bundle's register-spill warnings; with --werror-spills, UnsupportedError (exit 69) listing them."""
    lines = spill_warnings(out_dir)
    if lines and options.werror_spills:
        raise UnsupportedError(f"--werror-spills: {len(lines)} binaries spill registers: "
                               + "; ".join(line.removeprefix("warning: ") for line in lines), file=str(out_dir))
    return lines
