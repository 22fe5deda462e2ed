"""Code generation: lowerings of entry instructions into a typed kernel-body IR, rendered through the
jinja2 skeletons in templates/ into Triton source (one Kernel per launching instruction).

Empty on purpose: importing a submodule (mlcc.emit.codegen.kernel) must not import the lowerings, which
import the target modules, which import kernel."""
