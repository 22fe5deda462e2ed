// expect: chlo.scan
func.func @main(%x: tensor<4xf32>, %init: tensor<f32>) -> tensor<4xf32> {
  %0:2 = "chlo.scan"(%x, %init) <{dimension = 0 : i64, is_reverse = false}> ({
  ^bb0(%a: tensor<f32>, %c: tensor<f32>):
    %s = stablehlo.add %a, %c : tensor<f32>
    stablehlo.return %s, %s : tensor<f32>, tensor<f32>
  }) : (tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<f32>)
  return %0#0 : tensor<4xf32>
}
