// expect: with element type f8E3M4
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.constant dense<[1.000000e+00, 2.0, 0.5, -1.0]> : tensor<4xf8E3M4>
  %1 = stablehlo.convert %0 : (tensor<4xf8E3M4>) -> tensor<4xf32>
  %2 = stablehlo.add %1, %x : tensor<4xf32>
  return %2 : tensor<4xf32>
}
