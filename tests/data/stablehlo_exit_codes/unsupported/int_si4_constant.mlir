// expect: stablehlo.constant with element type si4
func.func @main() -> tensor<4xsi4> {
  %0 = stablehlo.constant dense<[1, 0, 1, 1]> : tensor<4xsi4>
  return %0 : tensor<4xsi4>
}
