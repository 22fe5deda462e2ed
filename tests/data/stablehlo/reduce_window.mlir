module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x6x6x2xf32>, %arg1: tensor<4x8xf32>) -> (tensor<2x3x3x2xf32> {jax.result_info = "result[0]"}, tensor<2x3x3x2xf32> {jax.result_info = "result[1]"}, tensor<2x7xf32> {jax.result_info = "result[2]"}, tensor<2x6xf32> {jax.result_info = "result[3]"}) {
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<f32>
    %1 = "stablehlo.reduce_window"(%arg0, %0) <{base_dilations = array<i64: 1, 1, 1, 1>, padding = dense<[[0, 0], [0, 1], [0, 1], [0, 0]]> : tensor<4x2xi64>, window_dilations = array<i64: 1, 1, 1, 1>, window_dimensions = array<i64: 1, 3, 3, 1>, window_strides = array<i64: 1, 2, 2, 1>}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %9 = stablehlo.maximum %arg2, %arg3 : tensor<f32>
      stablehlo.return %9 : tensor<f32>
    }) : (tensor<2x6x6x2xf32>, tensor<f32>) -> tensor<2x3x3x2xf32>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<f32>
    %3 = "stablehlo.reduce_window"(%arg0, %2) <{base_dilations = array<i64: 1, 1, 1, 1>, padding = dense<0> : tensor<4x2xi64>, window_dilations = array<i64: 1, 1, 1, 1>, window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 1>}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %9 = stablehlo.add %arg2, %arg3 : tensor<f32>
      stablehlo.return %9 : tensor<f32>
    }) : (tensor<2x6x6x2xf32>, tensor<f32>) -> tensor<2x3x3x2xf32>
    %cst_1 = stablehlo.constant dense<4.000000e+00> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2x3x3x2xf32>
    %5 = stablehlo.divide %3, %4 : tensor<2x3x3x2xf32>
    %cst_2 = stablehlo.constant dense<0x7F800000> : tensor<f32>
    %6 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<f32>
    %7 = "stablehlo.reduce_window"(%arg1, %6) <{base_dilations = array<i64: 1, 1>, padding = dense<0> : tensor<2x2xi64>, window_dilations = array<i64: 2, 1>, window_dimensions = array<i64: 2, 2>, window_strides = array<i64: 1, 1>}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %9 = stablehlo.minimum %arg2, %arg3 : tensor<f32>
      stablehlo.return %9 : tensor<f32>
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<2x7xf32>
    %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %8 = "stablehlo.reduce_window"(%arg1, %cst_3) <{base_dilations = array<i64: 1, 1>, padding = dense<0> : tensor<2x2xi64>, window_dilations = array<i64: 1, 1>, window_dimensions = array<i64: 2, 3>, window_strides = array<i64: 2, 1>}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %9 = stablehlo.add %arg2, %arg3 : tensor<f32>
      stablehlo.return %9 : tensor<f32>
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<2x6xf32>
    return %1, %5, %7, %8 : tensor<2x3x3x2xf32>, tensor<2x3x3x2xf32>, tensor<2x7xf32>, tensor<2x6xf32>
  }
}
