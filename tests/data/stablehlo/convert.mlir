module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xi32>, %arg2: tensor<4x8xui8>) -> (tensor<4x8xi32> {jax.result_info = "result[0]"}, tensor<4x8xf16> {jax.result_info = "result[1]"}, tensor<4x8xbf16> {jax.result_info = "result[2]"}, tensor<4x8xf32> {jax.result_info = "result[3]"}, tensor<4x8xi1> {jax.result_info = "result[4]"}, tensor<4x8xf32> {jax.result_info = "result[5]"}, tensor<4x8xi64> {jax.result_info = "result[6]"}, tensor<4x8xf64> {jax.result_info = "result[7]"}) {
    %0 = stablehlo.convert %arg0 : (tensor<4x8xf32>) -> tensor<4x8xi32>
    %1 = stablehlo.convert %arg0 : (tensor<4x8xf32>) -> tensor<4x8xf16>
    %2 = stablehlo.convert %arg0 : (tensor<4x8xf32>) -> tensor<4x8xbf16>
    %3 = stablehlo.convert %arg1 : (tensor<4x8xi32>) -> tensor<4x8xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
    %5 = stablehlo.compare NE, %arg0, %4, FLOAT : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
    %6 = stablehlo.convert %5 : tensor<4x8xi1>
    %7 = stablehlo.convert %arg2 : (tensor<4x8xui8>) -> tensor<4x8xf32>
    %8 = stablehlo.convert %arg2 : (tensor<4x8xui8>) -> tensor<4x8xi64>
    %9 = stablehlo.convert %arg0 : (tensor<4x8xf32>) -> tensor<4x8xf64>
    return %0, %1, %2, %3, %6, %7, %8, %9 : tensor<4x8xi32>, tensor<4x8xf16>, tensor<4x8xbf16>, tensor<4x8xf32>, tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xi64>, tensor<4x8xf64>
  }
}
