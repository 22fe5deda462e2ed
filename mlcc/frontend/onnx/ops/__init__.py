"""Import rules, one module per family of ONNX ops (each registers itself in the registry)."""
