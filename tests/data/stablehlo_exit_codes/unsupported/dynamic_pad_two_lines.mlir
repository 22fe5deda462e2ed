// expect: stablehlo.dynamic_pad
func.func @main(%a: tensor<4xf32>, %p: tensor<f32>, %l: tensor<1xi64>, %h: tensor<1xi64>, %i: tensor<1xi64>) -> tensor<?xf32> {
  %0 = stablehlo.dynamic_pad %a, %p, %l, %h, %i
         : (tensor<4xf32>, tensor<f32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
