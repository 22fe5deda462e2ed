module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<1x6x7x2xf32>, %arg1: tensor<4x8xf32>, %arg2: tensor<4x8xi32>) -> (tensor<1x5x3x2xf32> {jax.result_info = "result[0]"}, tensor<1x6x4x2xf32> {jax.result_info = "result[1]"}, tensor<5x4xf32> {jax.result_info = "result[2]"}, tensor<2x4xf32> {jax.result_info = "result[3]"}, tensor<2x4xi32> {jax.result_info = "result[4]"}, tensor<4x8xi32> {jax.result_info = "result[5]"}, tensor<1x6x7x2xf32> {jax.result_info = "result[6]"}) {
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %0 = "stablehlo.reduce_window"(%arg0, %cst) <{base_dilations = array<i64: 1, 1, 1, 1>, padding = dense<0> : tensor<4x2xi64>, window_dilations = array<i64: 1, 1, 1, 1>, window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 1, 2, 1>}> ({
    ^bb0(%arg3: tensor<f32>, %arg4: tensor<f32>):
      %11 = stablehlo.multiply %arg3, %arg4 : tensor<f32>
      stablehlo.return %11 : tensor<f32>
    }) : (tensor<1x6x7x2xf32>, tensor<f32>) -> tensor<1x5x3x2xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<f32>
    %2 = "stablehlo.reduce_window"(%arg0, %1) <{base_dilations = array<i64: 1, 2, 1, 1>, padding = dense<[[0, 0], [1, 2], [2, 1], [0, 0]]> : tensor<4x2xi64>, window_dilations = array<i64: 1, 1, 1, 1>, window_dimensions = array<i64: 1, 3, 3, 1>, window_strides = array<i64: 1, 2, 2, 1>}> ({
    ^bb0(%arg3: tensor<f32>, %arg4: tensor<f32>):
      %11 = stablehlo.maximum %arg3, %arg4 : tensor<f32>
      stablehlo.return %11 : tensor<f32>
    }) : (tensor<1x6x7x2xf32>, tensor<f32>) -> tensor<1x6x4x2xf32>
    %cst_1 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %3 = "stablehlo.reduce_window"(%arg1, %cst_1) <{base_dilations = array<i64: 1, 1>, padding = dense<[[1, 1], [2, 0]]> : tensor<2x2xi64>, window_dilations = array<i64: 1, 1>, window_dimensions = array<i64: 2, 3>, window_strides = array<i64: 1, 2>}> ({
    ^bb0(%arg3: tensor<f32>, %arg4: tensor<f32>):
      %11 = stablehlo.add %arg3, %arg4 : tensor<f32>
      stablehlo.return %11 : tensor<f32>
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<5x4xf32>
    %4 = stablehlo.iota dim = 1 : tensor<4x8xi32>
    %cst_2 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %c = stablehlo.constant dense<0> : tensor<i32>
    %5:2 = "stablehlo.reduce_window"(%arg1, %4, %cst_2, %c) <{base_dilations = array<i64: 1, 1>, padding = dense<0> : tensor<2x2xi64>, window_dilations = array<i64: 1, 1>, window_dimensions = array<i64: 2, 2>, window_strides = array<i64: 2, 2>}> ({
    ^bb0(%arg3: tensor<f32>, %arg4: tensor<i32>, %arg5: tensor<f32>, %arg6: tensor<i32>):
      %11 = stablehlo.compare GT, %arg5, %arg3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %12 = func.call @_where(%11, %arg5, %arg3) : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
      %13 = func.call @_where_0(%11, %arg6, %arg4) : (tensor<i1>, tensor<i32>, tensor<i32>) -> tensor<i32>
      stablehlo.return %12, %13 : tensor<f32>, tensor<i32>
    }) : (tensor<4x8xf32>, tensor<4x8xi32>, tensor<f32>, tensor<i32>) -> (tensor<2x4xf32>, tensor<2x4xi32>)
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %6 = "stablehlo.reduce_window"(%arg2, %c_3) <{base_dilations = array<i64: 1, 1>, padding = dense<[[0, 1], [0, 1]]> : tensor<2x2xi64>, window_dilations = array<i64: 1, 1>, window_dimensions = array<i64: 2, 2>, window_strides = array<i64: 1, 1>}> ({
    ^bb0(%arg3: tensor<i32>, %arg4: tensor<i32>):
      %11 = stablehlo.or %arg3, %arg4 : tensor<i32>
      stablehlo.return %11 : tensor<i32>
    }) : (tensor<4x8xi32>, tensor<i32>) -> tensor<4x8xi32>
    %cst_4 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<1x3x4x2xf32>
    %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %8 = stablehlo.pad %7, %cst_5, low = [0, 2, 1, 0], high = [0, 1, 1, 0], interior = [0, 1, 1, 0] : (tensor<1x3x4x2xf32>, tensor<f32>) -> tensor<1x8x9x2xf32>
    %cst_6 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<f32>
    %10 = "stablehlo.reduce_window"(%8, %9) <{base_dilations = array<i64: 1, 1, 1, 1>, padding = dense<0> : tensor<4x2xi64>, window_dilations = array<i64: 1, 1, 1, 1>, window_dimensions = array<i64: 1, 3, 3, 1>, window_strides = array<i64: 1, 1, 1, 1>}> ({
    ^bb0(%arg3: tensor<f32>, %arg4: tensor<f32>):
      %11 = stablehlo.add %arg3, %arg4 : tensor<f32>
      stablehlo.return %11 : tensor<f32>
    }) : (tensor<1x8x9x2xf32>, tensor<f32>) -> tensor<1x6x7x2xf32>
    return %0, %2, %3, %5#0, %5#1, %6, %10 : tensor<1x5x3x2xf32>, tensor<1x6x4x2xf32>, tensor<5x4xf32>, tensor<2x4xf32>, tensor<2x4xi32>, tensor<4x8xi32>, tensor<1x6x7x2xf32>
  }
  func.func private @_where(%arg0: tensor<i1>, %arg1: tensor<f32>, %arg2: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, tensor<f32>
    return %0 : tensor<f32>
  }
  func.func private @_where_0(%arg0: tensor<i1>, %arg1: tensor<i32>, %arg2: tensor<i32>) -> tensor<i32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<i1>, tensor<i32>
    return %0 : tensor<i32>
  }
}
