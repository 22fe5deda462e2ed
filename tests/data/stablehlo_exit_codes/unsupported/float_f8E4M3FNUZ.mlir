// expect: with element type f8E4M3FNUZ
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.constant dense<[1.000000e+00, 2.0, 0.5, -1.0]> : tensor<4xf8E4M3FNUZ>
  %1 = stablehlo.convert %0 : (tensor<4xf8E4M3FNUZ>) -> tensor<4xf32>
  %2 = stablehlo.add %1, %x : tensor<4xf32>
  return %2 : tensor<4xf32>
}
