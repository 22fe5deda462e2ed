"""Import rules, one module per op family; ``mlcc.frontend.stablehlo`` imports each by name."""
