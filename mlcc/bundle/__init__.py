"""The bundle format as code: the one home of what a bundle directory holds and means.

    manifest.json   manifest.Manifest (kernels, binaries, schedule, memory plan, weights, buffers)
    intent.json     intent.Intent (per buffer: uses, costs, tiers; the prefetch plan)
    kernels/*.py    kernels.import_jit: each defines the @triton.jit function it is named after
    weights.bin     layout.to_physical / from_physical, at layout.ALIGNMENT-aligned offsets

schemas: the JSON Schemas, the schema versions and the one JSON encoding; sizes: the grammar of size
expressions (print and evaluate); dtypes: dtype names; memory: footprints and memory budgets; digest:
``bundle_sha256``; errors: the error hierarchy with exit codes. The compiler writes a bundle through this
package (mlcc/emit/writer) and the runtime reads it through this package (mlcc/runtime); this package
imports nothing else from mlcc.
"""

from mlcc.bundle.digest import bundle_digest, file_sha256
from mlcc.bundle.dtypes import numpy_dtype, torch_dtype
from mlcc.bundle.errors import BundleError
from mlcc.bundle.intent import Intent, IntentBuffer, KvCacheEntry, Prefetch
from mlcc.bundle.layout import ALIGNMENT, align, from_physical, to_physical
from mlcc.bundle.manifest import (ArenaBuffer, Binary, BufferInfo, IoTensor, KernelEntry, Launch, LaunchConfig,
                                  Manifest, MemoryPlan, TensorSpec, Weights, WeightTensor)
from mlcc.bundle.memory import BudgetSpecError, fixed_bytes, footprint, parse_budget
from mlcc.bundle.schemas import (INTENT_SCHEMA_VERSION, OWN_GRID_SCHEMA_VERSION, PACKED_IO_SCHEMA_VERSION, SCHEMA_VERSION,
                                 SUPPORTED_SCHEMAS, SYMBOLIC_SCHEMA_VERSION, UNBOUNDED_SCHEMA_VERSION, dumps, load_schema,
                                 validate)
from mlcc.bundle.sizes import SizeError, eval_size

__all__ = ["ALIGNMENT", "INTENT_SCHEMA_VERSION", "OWN_GRID_SCHEMA_VERSION", "PACKED_IO_SCHEMA_VERSION", "SCHEMA_VERSION",
           "SUPPORTED_SCHEMAS", "SYMBOLIC_SCHEMA_VERSION", "UNBOUNDED_SCHEMA_VERSION",
           "ArenaBuffer", "Binary", "BudgetSpecError", "BufferInfo", "BundleError", "Intent",
           "IntentBuffer", "IoTensor", "KvCacheEntry", "KernelEntry", "Launch", "LaunchConfig", "Manifest", "MemoryPlan", "Prefetch",
           "SizeError", "TensorSpec", "WeightTensor", "Weights", "align", "bundle_digest", "dumps", "eval_size",
           "file_sha256", "fixed_bytes", "footprint", "from_physical", "load_schema", "numpy_dtype",
           "parse_budget", "to_physical", "torch_dtype", "validate"]
