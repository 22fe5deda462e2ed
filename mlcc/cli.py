"""The mlcc command line. Thin: click parses flags into options and calls the API.

Exit codes (README, "Exit codes"): 0 ok, 1 verification mismatch, 2 usage,
65 invalid input, 66 input missing, 69 unsupported, 70 internal error, 73 cannot create output.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import click

from mlcc import errors

_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _options(config_path: str | None, cli: dict[str, Any]) -> Any:
    """The compile options: mlcc.yaml (or --config) overridden by the command line. Imported here, not at the
    top: mlcc.config loads the whole compiler, which `mlcc inspect`, `run` and `simulate` never need."""
    from mlcc.config import load_config, merge_options
    cfg, cfg_file = load_config(config_path)
    return merge_options(cfg, cli, cfg_file)


def _emit_error(e: BaseException, as_json: bool) -> int:
    if isinstance(e, errors.MlccError):
        err = e
    elif e.__class__.__name__ == "BundleError":
        err = errors.InvalidInputError(str(e))
    elif e.__class__.__name__ == "ConfigError":  # mlcc.config loads the compiler: imported only by commands that compile
        err = errors.UsageError(str(e))
    else:
        err = errors.InternalError(f"{type(e).__name__}: {e} (please report this as an mlcc bug)")
    if as_json:
        click.echo(json.dumps({"ok": False, "diagnostics": [err.to_json()]}, sort_keys=True))
    else:
        click.echo(f"mlcc: error: {err}", err=True)
    return err.exit_code


@contextlib.contextmanager
def _diagnostics(as_json: bool, debug: bool = False) -> Iterator[None]:
    try:
        yield
    except (click.exceptions.Exit, SystemExit):  # a command's own exit status (verify's mismatch: 1)
        raise
    except (click.ClickException, click.Abort):
        raise
    except KeyboardInterrupt:
        click.echo("mlcc: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:  # `mlcc inspect DIR | head`: the reader left, nothing went wrong
        sys.stderr.close()
        sys.exit(0)
    except BaseException as e:  # noqa: BLE001 - every failure becomes one line and an exit code
        if debug:
            raise
        sys.exit(_emit_error(e, as_json))


@contextlib.contextmanager
def _progress(enabled: bool, delay: float = 5.0) -> Iterator[Callable[[str, int, int], None]]:
    """A status line on a terminal's stderr once the compile has run delay seconds; silent otherwise."""
    if not enabled or not sys.stderr.isatty():
        yield lambda stage, done, total: None
        return
    from mlcc.progress import ProgressLine
    with ProgressLine(sys.stderr, delay=delay) as line:
        yield line


def _parse_shapes(values: tuple[str, ...]) -> dict[str, list[Any]]:
    shapes: dict[str, list[Any]] = {}
    for v in values:
        name, sep, dims = v.rpartition("=")
        if not sep or not name:
            raise click.BadParameter(f"'{v}': expected NAME=1x128 or DIM=1", param_hint="--shape")
        if ".." in dims:
            shapes[name] = dims  # a symbolic dim kept symbolic over a range of sizes: MIN..MAX, or MIN..
            continue
        try:
            shapes[name] = [int(d) for d in dims.lower().split("x")]
        except ValueError:
            raise click.BadParameter(f"'{v}': dims must be integers like 1x128, or a range like 1..128",
                                     param_hint="--shape") from None
    return shapes


@click.group(context_settings=_CONTEXT)
@click.version_option(package_name="mlcc", prog_name="mlcc")
def main() -> None:
    """mlcc: compile ONNX and StableHLO models ahead of time into Triton-kernel bundles.

    \b
    mlcc compile model.onnx -o build/      compile a model into a bundle (or IR text: build/model.hlo)
    mlcc opt model.hlo --passes dce,cse    run passes over IR text, print the IR
    mlcc run build/ --inputs in.npz --output out.npz
    mlcc verify model.onnx                 compile, run, compare with onnxruntime
    mlcc inspect build/                    what the compiler did
    mlcc report build/ -o report.html      HTML report: graph, kernels, memory, roofline
    mlcc simulate build/ --hbm-budget 50%  residency policies under a memory budget (--trace t.yaml A B)
    mlcc tune model.onnx --db tuning.yaml  time tile candidates on this GPU (compile --tuning-db)
    """


@main.command("compile")
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Bundle directory to write (replaced only when the compile succeeds).")
@click.option("--target", "targets", default=None, help="Comma list of GPU targets: sm_80,sm_90,gfx942 (default sm_80,sm_90); none: no binaries.")
@click.option("--shape", "shapes", multiple=True, help="Specialize an input (NAME=1x128) or a symbolic dim (batch=1), or keep a symbolic dim "
              "symbolic over a range of sizes (seq=1..128) or from a size up (seq=1..). A symbolic dim given none of these "
              "takes any size. Repeatable.")
@click.option("--dump-ir", type=click.Path(file_okay=False), default=None, help="Write NN-<pass>.hlo after every pass into DIR.")
@click.option("--disable-pass", "disable_passes", multiple=True, help="Skip a pass by name. Repeatable.")
@click.option("--time-passes", is_flag=True, help="Print a table of pass times and instruction counts.")
@click.option("--explain-fusion", is_flag=True, help="Say, for each producer-consumer edge left unfused, why.")
@click.option("--check-numerics", is_flag=True, default=None,
              help="Run every kernel on CPU against the reference evaluator during the build; fail on a mismatch.")
@click.option("-j", "--jobs", type=click.IntRange(min=0), default=None, help="Parallel kernel compiles (default: cores).")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None, help="Kernel cache directory (default ~/.cache/mlcc).")
@click.option("--no-cache", is_flag=True, help="Do not read or write the kernel cache.")
@click.option("--force", is_flag=True, help="Rebuild even when the bundle is up to date.")
@click.option("--depfile", type=click.Path(dir_okay=False), default=None, help="Write a Make dependency file.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="Options file (default ./mlcc.yaml if present).")
@click.option("--device-model", default=None, help="Device model intent.json's costs assume: H100 (default), H200, A100.")
@click.option("--precision", type=click.Choice(["fp32", "tf32", "fp16", "bf16"]), default=None,
              help="Type weights are stored and activations computed in (fp32 accumulation). Default fp32.")
@click.option("--io-layout", type=click.Choice(["row-major", "any"]), default=None,
              help="Layout of the bundle's inputs and outputs: row-major (default, as the model defines) or "
                   "any (the compiler's choice, recorded in the manifest).")
@click.option("--tuning-db", type=click.Path(dir_okay=False), default=None,
              help="Tuning database (YAML, from mlcc tune): measured launch configs by kernel signature and target.")
@click.option("--require-tuned", is_flag=True, default=None,
              help="Fail (exit 69) if a tunable kernel has no tuning entry for a target; lists every one.")
@click.option("--werror-spills", is_flag=True, default=None,
              help="Fail (exit 69) if a kernel's binary spills registers (otherwise a warning per kernel and target).")
@click.option("--quantize", default=None, metavar="SCHEME",
              help="Quantize the float weights: w4 or w4:BLOCK (BLOCK 32, the default, or 128), weight-only 4-bit "
                   "blocks, symmetric, rounded as onnxruntime's MatMulNBitsQuantizer (RTN) does; or int8 (with "
                   "--calibration): static int8 QDQ, per-channel s8 weights, u8 activations, as onnxruntime's "
                   "quantize_static (MinMax) writes it.")
@click.option("--calibration", default=None, metavar="NPZ",
              help="Calibration inputs for --quantize int8: an .npz by input name, one sample per array or "
                   "S samples along a leading axis.")
@click.option("--fp8", "fp8", type=click.Choice(["upcast", "strict"]), default=None,
              help="fp8 contractions on a target whose tensor cores lack their fp8 types (sm_80; fnuz types on "
                   "sm_90, e4m3fn/e5m2 on gfx942): upcast (default: multiply in f16, exact, with a warning) or "
                   "strict (fail, exit 69).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the bundle's HTML report (as mlcc report) to this file.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable result and diagnostics on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
@click.option("--progress-delay", type=click.FloatRange(min=0), default=5.0, hidden=True,
              help="Seconds a compile runs before its progress shows on a terminal (default 5).")
@click.option("--debug", is_flag=True, hidden=True, help="Show Python tracebacks (for mlcc developers).")
def compile_cmd(model: Path, out_dir: Path, targets: str | None, shapes: tuple[str, ...], dump_ir: str | None,
                disable_passes: tuple[str, ...], time_passes: bool, explain_fusion: bool, check_numerics: bool | None,
                jobs: int | None, cache_dir: str | None,
                no_cache: bool, force: bool, depfile: str | None, config_path: str | None, device_model: str | None,
                precision: str | None, io_layout: str | None, tuning_db: str | None, require_tuned: bool | None,
                werror_spills: bool | None, quantize: str | None, calibration: str | None, fp8: str | None,
                report_path: Path | None, as_json: bool, quiet: bool,
                progress_delay: float, debug: bool) -> None:
    """Compile MODEL (.onnx, StableHLO .mlir, or the IR's text .hlo) into a bundle directory.

    IR text (a bundle's model.hlo) goes through the phases its header shows are still to do; the weights
    its constants refer to are read from the bundle's weights.bin beside it."""
    import mlcc
    with _diagnostics(as_json, debug):
        cli = {"targets": targets.split(",") if targets else None, "shapes": _parse_shapes(shapes) or None,
               "dump_ir": dump_ir, "disable_passes": list(disable_passes) or None, "time_passes": time_passes or None,
               "jobs": jobs, "cache_dir": "" if no_cache else cache_dir, "force": force or None, "depfile": depfile,
               "device_model": device_model, "check_numerics": check_numerics, "precision": precision,
               "io_layout": io_layout, "tuning_db": tuning_db, "require_tuned": require_tuned,
               "werror_spills": werror_spills, "quantize": quantize,
               "calibration": calibration, "fp8": fp8}
        options = _options(config_path, cli)
        with _progress(not quiet and not as_json, progress_delay) as progress:
            result = mlcc.compile(model, out_dir, progress=progress, options=options)
        m = result.manifest
        if report_path is not None:
            from mlcc.report import write_report
            write_report(out_dir, report_path, device_model=options.device_model)
        if as_json:
            click.echo(json.dumps({"ok": True, "up_to_date": result.up_to_date, "bundle": str(out_dir),
                                   "kernels": len(m["kernels"]), "launches": len(m["schedule"]),
                                   "targets": m["targets"], "build": result.build_stats,
                                   "warnings": result.warnings}, sort_keys=True))
        elif not quiet:
            if result.up_to_date:
                click.echo(f"{out_dir}: up to date")
            else:
                s = result.build_stats
                click.echo(f"{model} -> {out_dir}: {len(m['kernels'])} kernels, {len(m['schedule'])} launches, "
                           f"targets {','.join(m['targets'])} ({s.get('compiled', 0)} compiled, "
                           f"{s.get('cache_hits', 0)} from cache)")
        if not quiet and not as_json:
            for line in result.warnings:
                click.echo(line, err=True)
        if time_passes and result.pass_records:
            _print_pass_table(result.pass_records)
        if explain_fusion:
            for line in result.fusion_explanations:
                click.echo(f"unfused: {line}", err=True)


def _print_pass_table(records: list[Any]) -> None:
    rows = [(r.name, f"{r.seconds * 1000:.2f}", "yes" if r.changed else "", str(r.instructions)) for r in records]
    header = ("pass", "ms", "changed", "instructions")
    widths = [max(len(x[i]) for x in rows + [header]) for i in range(4)]
    click.echo("  ".join(h.ljust(w) for h, w in zip(header, widths)), err=True)
    for r in rows:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)), err=True)
    total = sum(x.seconds for x in records) * 1000
    click.echo(f"total {total:.2f} ms", err=True)


@main.command("opt")
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--passes", required=True, help="Comma list of passes or phases to run, in order (e.g. dce,cse,fusion).")
@click.option("-o", "--output", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the IR here (default: stdout).")
@click.option("--precision", type=click.Choice(["fp32", "tf32", "fp16", "bf16"]), default="fp32", show_default=True,
              help="What the precision pass converts to.")
@click.option("--io-layout", type=click.Choice(["row-major", "any"]), default="row-major", show_default=True,
              help="What layout-assignment may do with inputs and outputs.")
@click.option("--dump-ir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write NN-<pass>.hlo after every pass that changed the module into DIR.")
@click.option("--debug", is_flag=True, hidden=True, help="Show Python tracebacks (for mlcc developers).")
def opt_cmd(model: Path, passes: str, out_path: Path | None, precision: str, io_layout: str, dump_ir: Path | None,
            debug: bool) -> None:
    """Run passes over MODEL, the IR's text (.hlo), verifying after each; print the resulting IR."""
    from mlcc.opt import optimized_text
    with _diagnostics(False, debug):
        names = [n.strip() for n in passes.split(",") if n.strip()]
        text = optimized_text(model, names, precision=precision, io_layout=io_layout, dump_dir=dump_ir)
        if out_path is None:
            click.echo(text, nl=False)
        else:
            from mlcc.atomic import write_file_atomic
            write_file_atomic(out_path, text)


_DEVICE_HELP = ("cpu (the interpreter), cuda or cuda:N, or sim:TARGET[:N]: the CUDA path for one of the bundle's "
                "targets (sm_90, gfx942, ...) simulated on CPU, its binaries' launch configs run by the interpreter.")
_DEVICE_RE = r"cpu|cuda(:[0-9]+)?|sim:[A-Za-z0-9_]+(:[0-9]+)?"


def _check_device(ctx: click.Context, param: click.Parameter, value: str) -> str:
    import re
    if not re.fullmatch(_DEVICE_RE, value):
        raise click.BadParameter(f"'{value}' is not cpu, cuda, cuda:N or sim:TARGET")
    return value


@main.command("run")
@click.argument("bundles", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--inputs", "inputs_path", default=None, type=click.Path(dir_okay=False), help=".npz keyed by input name.")
@click.option("--output", "output_path", default=None, type=click.Path(dir_okay=False), help=".npz to write, keyed by output name.")
@click.option("--device", default="cpu", show_default=True, callback=_check_device, help=_DEVICE_HELP)
@click.option("--hbm-budget", "hbm_budget", default=None,
              help="Cap the device memory the bundle holds (bytes, or a percentage of its footprint such as 50%): "
                   "weights beyond it move between host and device memory as --policy decides.")
@click.option("--policy", default="intent", show_default=True, type=click.Choice(["intent", "lru", "static", "fnu"]),
              help="Residency policy under --hbm-budget (the one `mlcc simulate` models).")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Replay a trace over BUNDLES (its models, in order) and report the bytes copied; each call's inputs "
                   "are seeded random values (integers 0..7), a KV-cache bundle's caches the session's.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable diagnostics.")
def run_cmd(bundles: tuple[Path, ...], inputs_path: str | None, output_path: str | None, device: str,
            hbm_budget: str | None, policy: str, trace_path: Path | None, as_json: bool) -> None:
    """Run BUNDLE on the inputs in an .npz file and write the outputs to another; or, with --trace, replay a
    trace of calls to BUNDLES on one device under one budget."""
    import numpy as np

    import mlcc
    from mlcc.atomic import write_file_atomic
    from mlcc.verify import load_npz
    with _diagnostics(as_json):
        if trace_path is not None:
            _replay(bundles, trace_path, device, hbm_budget, policy, as_json)
            return
        if len(bundles) != 1 or inputs_path is None or output_path is None:
            raise click.UsageError("run one BUNDLE with --inputs and --output, or BUNDLES with --trace")
        exe = mlcc.load(bundles[0], device=device, hbm_budget=hbm_budget, policy=policy)
        feeds = load_npz(inputs_path)
        outs = exe.run({n: feeds[n] for n in exe.input_names if n in feeds})
        buf = io.BytesIO()
        np.savez(buf, **outs)
        write_file_atomic(Path(output_path), buf.getvalue())
        if as_json:
            click.echo(json.dumps({"ok": True, "outputs": {k: list(v.shape) for k, v in outs.items()}}, sort_keys=True))


def _replay(bundles: tuple[Path, ...], trace_path: Path, device: str, hbm_budget: str | None, policy: str,
            as_json: bool) -> None:
    from mlcc.runtime.session import Session, random_inputs
    from mlcc.runtime.simulate import simulate_bundles
    from mlcc.runtime.traces import load_trace
    try:
        trace = load_trace(trace_path)
    except ValueError as e:  # the message names the file and the event
        raise errors.InvalidInputError(str(e)) from None
    if len(trace.models) != len(bundles):
        raise click.UsageError(f"the trace names {len(trace.models)} models ({', '.join(trace.models)}), "
                               f"{len(bundles)} bundles given")
    spec = hbm_budget if hbm_budget is not None else (trace.budget if trace.budget is not None else "100%")
    try:
        session = Session(dict(zip(trace.models, bundles)), device, spec, policy, trace)
        session.replay({name: random_inputs(session, name) for name in trace.models})
        simulated = simulate_bundles(bundles, trace, spec, [policy], bound=False)["policies"][policy]["bytes_moved"]
    except ValueError as e:
        raise errors.InvalidInputError(str(e), file=str(trace_path)) from None
    result = {"ok": True, "calls": len(session.work.calls), "policy": policy, "footprint_bytes": session.work.footprint(),
              "copied_bytes": session.copied_bytes, "copies": session.store.copies,
              "preload_bytes": session.store.preload_bytes, "simulated_bytes": simulated}
    if as_json:
        click.echo(json.dumps(result, sort_keys=True))
    else:
        click.echo(f"{trace_path}: {result['calls']} calls on {device} under {spec} ({policy}): copied "
                   f"{result['copied_bytes']:,} bytes in {result['copies']} copies (the simulator's count: "
                   f"{result['simulated_bytes']:,}); {result['preload_bytes']:,} bytes placed at load")


@main.command("verify")
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--bundle", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Bundle to check (compiled first if missing or out of date); default: a temporary one.")
@click.option("--inputs", "inputs_path", type=click.Path(dir_okay=False), default=None,
              help=".npz of inputs (and optionally expected outputs 'out:<name>'); default: seeded random inputs.")
@click.option("--device", default="cpu", show_default=True, callback=_check_device, help=_DEVICE_HELP)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--rtol", type=float, default=None, help="Relative tolerance (default by dtype: f32 1e-3).")
@click.option("--atol", type=float, default=None, help="Absolute tolerance (default by dtype: f32 1e-5).")
@click.option("--target", "targets", default=None, help="Targets when compiling (default sm_80,sm_90).")
@click.option("--precision", type=click.Choice(["fp32", "tf32", "fp16", "bf16"]), default="fp32", show_default=True,
              help="Compile at this precision; the default tolerances follow it.")
@click.option("--shape", "shapes", multiple=True,
              help="As for compile. A symbolic dim kept over a range (seq=1..64) is checked at its smallest, "
                   "middle and largest size. Repeatable.")
@click.option("--quantize", default=None, metavar="SCHEME",
              help="As for compile; also builds the float model and reports both errors (the accuracy change). "
                   "The quantized outputs are held to --rtol/--atol only when given.")
@click.option("--calibration", default=None, metavar="NPZ", help="As for compile (--quantize int8).")
@click.option("--json", "as_json", is_flag=True)
def verify_cmd(model: Path, bundle: Path | None, inputs_path: str | None, device: str, seed: int,
               rtol: float | None, atol: float | None, targets: str | None, precision: str, shapes: tuple[str, ...],
               quantize: str | None, calibration: str | None, as_json: bool) -> None:
    """Compile MODEL if needed, run it, and compare every output with onnxruntime (exit 1 on mismatch)."""
    import mlcc
    from mlcc.compiler import detect_format
    from mlcc.bundle.dtypes import as_dtype
    from mlcc.verify import (PRECISION_TOLERANCES, ReferenceUnavailableError, compare, integer_ranges, load_npz,
                             onnxruntime_outputs, random_inputs, symbol_sizes)
    with _diagnostics(as_json):
        with contextlib.ExitStack() as stack:
            out_dir = bundle or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mlcc-verify-"))) / "b"
            default_targets = ["sm_80", "sm_90"]
            sim_target = device.split(":")[1] if device.startswith("sim:") else None
            if sim_target and sim_target not in default_targets:  # --device sim:gfx942 compiles for it too
                default_targets.append(sim_target)
            opts = mlcc.CompileOptions(targets=targets.split(",") if targets else default_targets, precision=precision,
                                       shapes=_parse_shapes(shapes), quantize=quantize,
                                       calibration=calibration)
            tol = PRECISION_TOLERANCES[precision]
            data = load_npz(inputs_path) if inputs_path else {}

            def check(bundle_dir: Path, options: Any, rtol: float | None, atol: float | None) -> tuple[list, str]:
                mlcc.compile(model, bundle_dir, options=options)
                exe = mlcc.load(bundle_dir, device=device)
                types = {t["name"]: t["numpy_dtype"] for t in exe.manifest["inputs"] + exe.manifest["outputs"]}
                feeds = {n: as_dtype(data[n], types[n]) for n in exe.input_names if n in data}
                runs = [feeds]
                if len(feeds) != len(exe.input_names):
                    ranges = integer_ranges(model) if detect_format(model) == "onnx" else {}
                    runs = [random_inputs(exe.manifest["inputs"], seed, env, ranges)
                            for env in symbol_sizes(exe.manifest.get("symbols", {}), exe.manifest.get("planned_sizes"))]
                checks, reference = [], "npz"
                for feeds in runs:
                    got = exe.run(feeds)
                    expected = {n[4:]: v for n, v in data.items() if n.startswith("out:")}
                    expected.update({n: v for n, v in data.items() if n.startswith("out") and n[3:].isdigit()})
                    expected = {n: as_dtype(v, types[n]) if n in types else v for n, v in expected.items()}
                    if detect_format(model) == "onnx":
                        try:
                            expected, reference = onnxruntime_outputs(model, feeds), "onnxruntime"
                        except ReferenceUnavailableError:
                            if not expected:  # nothing else to compare with
                                raise
                    if not expected and detect_format(model).startswith("stablehlo"):
                        # the program as imported, run by the IR evaluator in numpy (complex inputs and
                        # outputs as complex arrays, as the bundle takes and gives them)
                        from mlcc.frontend.stablehlo import import_stablehlo
                        from mlcc.hlo.evaluator import evaluate
                        expected, reference = evaluate(import_stablehlo(model), feeds), "evaluator"
                    if not expected:
                        raise errors.UsageError(f"no reference for {model}: give --inputs with expected outputs 'outN'")
                    checks += compare(got, expected, rtol if rtol is not None or tol is None else tol[0],
                                      atol if atol is not None or tol is None else tol[1])
                return checks, reference

            float_checks: list = []
            if quantize:
                # the float build is held to the precision's tolerances; the quantized one only to --rtol/--atol
                # when given (its error against the float model is the accuracy change it reports)
                float_opts = dataclasses.replace(opts, quantize=None, calibration=None)
                float_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mlcc-verify-float-"))) / "b"
                float_checks, _ = check(float_dir, float_opts, rtol, atol)
                given = rtol is not None or atol is not None  # else only a NaN/inf where the reference has none fails
                checks, reference = check(out_dir, opts, rtol if given else 0.0, atol if given else float("inf"))
            else:
                checks, reference = check(out_dir, opts, rtol, atol)
        ok = all(c.ok for c in checks + float_checks)
        if as_json:
            result = {"ok": ok, "reference": reference, "outputs": [c.__dict__ | {"shape": list(c.shape)} for c in checks]}
            if quantize:
                result |= {"quantize": quantize,
                           "float_outputs": [c.__dict__ | {"shape": list(c.shape)} for c in float_checks]}
            click.echo(json.dumps(result, sort_keys=True))
        else:
            for c in checks:
                click.echo(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.dtype}{list(c.shape)} max abs err {c.max_abs:.3g}, "
                           f"max rel err {c.max_rel:.3g} (vs {reference})")
            if quantize:
                bad = [c.name for c in float_checks if not c.ok]
                change = ", ".join(f"{c.name} {f.max_abs:.3g} -> {c.max_abs:.3g}"
                                   for c, f in zip(checks, float_checks))
                click.echo(f"{'ok  ' if not bad else 'FAIL'} --quantize {quantize}: max abs err vs {reference}, "
                           f"float build -> quantized: {change}"
                           + (f" (the float build fails: {', '.join(bad)})" if bad else ""))
        if not ok:
            sys.exit(errors.EXIT_MISMATCH)


@main.command("inspect")
@click.argument("bundle", type=click.Path(file_okay=False, path_type=Path))
@click.option("--device-model", default=None, help="Device model for roofline times: H100, H200, A100 (default: the bundle's).")
@click.option("--binaries", is_flag=True, help="Per kernel and target: registers, spills, shared memory, occupancy, "
                                                "matrix instructions, read from the binaries.")
@click.option("--abi", is_flag=True, help="Check every launch's parameters and grid against the binaries (exit 65 "
                                          "listing each mismatch).")
@click.option("--json", "as_json", is_flag=True, help="The summary as JSON.")
def inspect_cmd(bundle: Path, device_model: str | None, binaries: bool, abi: bool, as_json: bool) -> None:
    """Summarize a bundle: kernels (fusion kind, source ops, FLOPs, bytes, roofline), layout conversions,
    memory plan, memory intent by tensor class."""
    from mlcc.inspect import binaries_summary, render_binaries, render_text, summarize
    with _diagnostics(as_json):
        if abi:
            from mlcc.emit.target.abi import check_bundle
            problems = check_bundle(bundle)
            if problems:
                raise errors.BundleError(f"launch ABI: {len(problems)} mismatches: "
                                         + "; ".join(str(p) for p in problems), file=str(bundle))
            if as_json:
                click.echo(json.dumps({"ok": True, "abi_problems": []}))
            else:
                click.echo(f"{bundle}: launch ABI ok (every launch's parameters and grid match the binaries)")
            return
        if binaries:
            summary = binaries_summary(bundle)
            if as_json:
                click.echo(json.dumps(summary, sort_keys=True, indent=1))
            else:
                render_binaries(summary)
            return
        summary = summarize(bundle, device_model)
        if as_json:
            click.echo(json.dumps(summary, sort_keys=True, indent=1))
        else:
            render_text(summary)


@main.command("report")
@click.argument("bundle", type=click.Path(file_okay=False, path_type=Path))
@click.option("-o", "--output", "out_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="HTML file to write (one self-contained file).")
@click.option("--device-model", default=None, help="Device model for the roofline: H100, H200, A100 (default: the bundle's).")
def report_cmd(bundle: Path, out_path: Path, device_model: str | None) -> None:
    """Write an HTML report of BUNDLE: source graph with fusion groups, kernels, memory timeline, roofline."""
    from mlcc.report import write_report
    with _diagnostics(False):
        write_report(bundle, out_path, device_model=device_model)
        click.echo(f"{bundle} -> {out_path}")


@main.command("simulate")
@click.argument("bundles", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A trace of calls (YAML or JSON, README 'Traces'); its models name the BUNDLES in order.")
@click.option("--hbm-budget", "budget", default=None,
              help="Device memory budget: bytes, or a percentage of the footprint (50%); default: the trace's.")
@click.option("--iterations", type=click.IntRange(min=1), default=4, show_default=True,
              help="Without a trace: calls of the one bundle to replay.")
@click.option("--policy", "policies", default=",".join(("intent", "lru", "static", "fnu", "oracle")), show_default=True,
              help="Comma list of policies to replay.")
@click.option("--no-bound", is_flag=True, help="Skip the lower bound (a few seconds on big traces).")
@click.option("--json", "as_json", is_flag=True)
def simulate_cmd(bundles: tuple[Path, ...], trace_path: Path | None, budget: str | None, iterations: int,
                 policies: str, no_bound: bool, as_json: bool) -> None:
    """Replay calls to BUNDLES under a memory budget: bytes over the host link and modeled stall per residency
    policy, against a lower bound on the bytes any policy moves."""
    from mlcc.runtime.simulate import repeat_trace, simulate_bundles
    from mlcc.runtime.traces import load_trace
    with _diagnostics(as_json):
        for b in bundles:
            if not (b / "intent.json").is_file():
                raise errors.InputMissingError("no intent.json here (not an mlcc bundle)", file=str(b))
        if trace_path is not None:
            try:
                trace = load_trace(trace_path)
            except ValueError as e:  # the message names the file and the event
                raise errors.InvalidInputError(str(e)) from None
        elif len(bundles) == 1:
            trace = repeat_trace(bundles[0].name, iterations)
        else:
            raise click.UsageError("several bundles need a --trace that says how they are called")
        spec = budget if budget is not None else trace.budget
        if spec is None:
            raise click.UsageError("give --hbm-budget (or a trace with a budget)")
        names = [n.strip() for n in policies.split(",") if n.strip()]
        try:
            r = simulate_bundles(bundles, trace, spec, names, bound=not no_bound)
        except ValueError as e:
            raise errors.InvalidInputError(str(e), file=str(trace_path or bundles[0])) from None
        if as_json:
            click.echo(json.dumps(r, sort_keys=True, indent=1))
            return
        click.echo(f"footprint {r['footprint_bytes']:,} bytes (fixed {r['fixed_bytes']:,}), budget "
                   f"{r['budget_bytes']:,} bytes, {r['calls']} calls ({r['steps']} steps), device model {r['device_model']}")
        for name, p in r["policies"].items():
            click.echo(f"  {name:<7} moved {p['bytes_moved']:>15,} bytes  stall {p['stall_seconds'] * 1e6:>12.1f} us  "
                       f"({p['fetches']} fetches, {p['writebacks']} write-backs)")
        if "lower_bound_bytes" in r:
            click.echo(f"  lower bound {r['lower_bound_bytes']:,} bytes (no policy moves fewer)")


@main.command("tune")
@click.argument("model", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--db", "db_path", required=True, type=click.Path(dir_okay=False),
              help="Tuning database to update (created if missing; entries of other kernels are kept).")
@click.option("--target", default=None, help="Target to tune for (default: this GPU's, e.g. sm_90).")
@click.option("--repeat", type=click.IntRange(min=1), default=50, show_default=True,
              help="Timed runs per candidate (the median counts), after warm-up.")
@click.option("--shape", "shapes", multiple=True, help="Specialize an input or a dim, as for compile. Repeatable.")
@click.option("--precision", type=click.Choice(["fp32", "tf32", "fp16", "bf16"]), default=None,
              help="As for compile: the kernels tuned are those this precision gives.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="Options file (default ./mlcc.yaml if present), as for compile.")
@click.option("--device", default="cuda", show_default=True,
              help="Where candidates run: cuda, cuda:N, or sim:TARGET (Triton's interpreter on CPU: checks the "
                   "candidates, times mean nothing).")
@click.option("--json", "as_json", is_flag=True, help="The measurements as JSON on stdout.")
def tune_cmd(model: Path, db_path: str, target: str | None, repeat: int, shapes: tuple[str, ...],
             precision: str | None, config_path: str | None, device: str, as_json: bool) -> None:
    """Time launch-config candidates of MODEL's matmul, convolution and attention kernels on a CUDA GPU
    and merge the fastest into a tuning database (exit 69 without a CUDA device, unless --device sim:TARGET)."""
    from mlcc.emit.target.tune import tune_model
    with _diagnostics(as_json):
        options = _options(config_path, {"shapes": _parse_shapes(shapes) or None, "precision": precision})
        results = tune_model(model, db_path, options, target=target, repeat=repeat, device=device,
                             log=None if as_json else lambda line: click.echo(line, err=True))
        if as_json:
            click.echo(json.dumps({"ok": True, "db": db_path, "kernels": results}, sort_keys=True))
        else:
            for r in results:
                was = "heuristic did not run" if r["heuristic_us"] is None else f"{r['heuristic_us']:.1f} us"
                click.echo(f"{r['kernel']} ({r['template']}) on {r['target']}: {was} -> "
                           f"{r['best_us']:.1f} us with {r['candidates']} candidates")
            click.echo(f"{db_path}: {len(results)} kernel(s) tuned")


@main.command("config")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None)
def config_cmd(config_path: str | None) -> None:
    """Print the effective configuration (mlcc.yaml merged over the defaults) as YAML."""
    import dataclasses

    import yaml
    with _diagnostics(False):
        options = _options(config_path, {})
        click.echo(yaml.safe_dump(dataclasses.asdict(options), sort_keys=True), nl=False)


if __name__ == "__main__":
    main()
