module @spec_ops {
  func.func public @main(%arg0: tensor<3x4xf32>, %arg1: tensor<4x2xf32>, %arg2: tensor<3x3xf32>, %arg3: tensor<3x2xf32>, %arg4: tensor<i1>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x4xf32>) {
    %0 = stablehlo.dot %arg0, %arg1 : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
    %1 = "stablehlo.triangular_solve"(%arg2, %arg3) {left_side = true, lower = true, unit_diagonal = false, transpose_a = #stablehlo<transpose NO_TRANSPOSE>} : (tensor<3x3xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %2 = "stablehlo.if"(%arg4) ({
      %5 = stablehlo.add %0, %1 : tensor<3x2xf32>
      stablehlo.return %5 : tensor<3x2xf32>
    }, {
      %5 = stablehlo.subtract %0, %1 : tensor<3x2xf32>
      stablehlo.return %5 : tensor<3x2xf32>
    }) : (tensor<i1>) -> tensor<3x2xf32>
    %3 = stablehlo.logistic %arg0 : tensor<3x4xf32>
    %4 = stablehlo.composite "mlcc.scale_by_two" %0 {decomposition = @scale_by_two} : (tensor<3x2xf32>) -> tensor<3x2xf32>
    return %0, %2, %4, %3 : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x4xf32>
  }
  func.func private @scale_by_two(%arg0: tensor<3x2xf32>) -> tensor<3x2xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<3x2xf32>
    return %0 : tensor<3x2xf32>
  }
}
