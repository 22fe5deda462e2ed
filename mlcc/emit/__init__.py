"""Emission: IR instructions to Triton kernels (from templates) to binaries per target."""
