module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf32>, %arg1: tensor<8xf32>) -> (tensor<4x3x8xf32> {jax.result_info = "result[0]"}, tensor<5x8xf64> {jax.result_info = "result[1]"}, tensor<2x3xf32> {jax.result_info = "result[2]"}) {
    %0 = stablehlo.broadcast_in_dim %arg0, dims = [0, 2] : (tensor<4x8xf32>) -> tensor<4x1x8xf32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [0, 1, 2] : (tensor<4x1x8xf32>) -> tensor<4x3x8xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f64>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f64>) -> tensor<5x8xf64>
    %3 = stablehlo.convert %arg1 : (tensor<8xf32>) -> tensor<8xf64>
    %4 = stablehlo.broadcast_in_dim %3, dims = [1] : (tensor<8xf64>) -> tensor<1x8xf64>
    %5 = stablehlo.broadcast_in_dim %4, dims = [0, 1] : (tensor<1x8xf64>) -> tensor<5x8xf64>
    %6 = stablehlo.add %5, %2 : tensor<5x8xf64>
    %cst_0 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    return %1, %6, %7 : tensor<4x3x8xf32>, tensor<5x8xf64>, tensor<2x3xf32>
  }
}
