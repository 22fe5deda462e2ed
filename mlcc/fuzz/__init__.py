"""Differential fuzzing: random ONNX models valid by construction (``generator``), compiled by mlcc and run
on CPU, compared with onnxruntime (``runner``); a failing model is shrunk to a minimal one and saved as a
regression (``shrink``). ``tools/fuzz.py`` is the command line."""
