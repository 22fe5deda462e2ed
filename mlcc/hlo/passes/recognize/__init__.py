"""Recognition: the decomposed forms exporters emit, rewritten into the composite ops the
author wrote (layer-norm, rms-norm, gelu, softmax, attention), one pass per op family."""
