// expect: stablehlo.constant with element type f8E4M3FN
func.func @main() -> tensor<4xf8E4M3FN> {
  %0 = stablehlo.constant dense<"0x38404448"> : tensor<4xf8E4M3FN>
  return %0 : tensor<4xf8E4M3FN>
}
