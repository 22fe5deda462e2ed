// expect: undefined value '%zz'
func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %zz : tensor<2xf32>
  return %0 : tensor<2xf32>
}
