"""The ONNX frontend: ``import_onnx(model) -> Module``.

Every rule module is imported here by name, so the rule table never depends
on which module happened to be imported first.
"""

from mlcc.frontend.onnx.ops import attention  # noqa: F401
from mlcc.frontend.onnx.ops import causal_conv  # noqa: F401
from mlcc.frontend.onnx.ops import control  # noqa: F401
from mlcc.frontend.onnx.ops import conv  # noqa: F401
from mlcc.frontend.onnx.ops import deform_conv  # noqa: F401
from mlcc.frontend.onnx.ops import dynamic  # noqa: F401
from mlcc.frontend.onnx.ops import elementwise  # noqa: F401
from mlcc.frontend.onnx.ops import flex_attention  # noqa: F401
from mlcc.frontend.onnx.ops import grid_sample  # noqa: F401
from mlcc.frontend.onnx.ops import indexing  # noqa: F401
from mlcc.frontend.onnx.ops import linalg  # noqa: F401
from mlcc.frontend.onnx.ops import loss  # noqa: F401
from mlcc.frontend.onnx.ops import movement  # noqa: F401
from mlcc.frontend.onnx.ops import nbits  # noqa: F401
from mlcc.frontend.onnx.ops import normalization  # noqa: F401
from mlcc.frontend.onnx.ops import optional  # noqa: F401
from mlcc.frontend.onnx.ops import qlinear  # noqa: F401
from mlcc.frontend.onnx.ops import quantize  # noqa: F401
from mlcc.frontend.onnx.ops import recurrent  # noqa: F401
from mlcc.frontend.onnx.ops import reduce  # noqa: F401
from mlcc.frontend.onnx.ops import resize  # noqa: F401
from mlcc.frontend.onnx.ops import roi_align  # noqa: F401
from mlcc.frontend.onnx.ops import sequence  # noqa: F401
from mlcc.frontend.onnx.ops import shape_ops  # noqa: F401
from mlcc.frontend.onnx.ops import signal  # noqa: F401
from mlcc.frontend.onnx.ops import tfidf  # noqa: F401
from mlcc.frontend.onnx.ops import training  # noqa: F401
from mlcc.frontend.onnx.ops import tree_ensemble  # noqa: F401
from mlcc.frontend.onnx.ops import unpool  # noqa: F401
from mlcc.frontend.onnx.errors import (FrontendError, InvalidModelError, ModelNotFoundError, UnsupportedFeatureError,
                                       UnsupportedOpError)
from mlcc.frontend.onnx.importer import import_onnx

__all__ = ["import_onnx", "FrontendError", "InvalidModelError", "ModelNotFoundError", "UnsupportedFeatureError",
           "UnsupportedOpError"]
