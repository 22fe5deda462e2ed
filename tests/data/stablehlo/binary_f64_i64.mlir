module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf64>, %arg1: tensor<4x8xi64>, %arg2: tensor<4x8xi64>) -> (tensor<4x8xf64> {jax.result_info = "result[0]"}, tensor<4x8xi64> {jax.result_info = "result[1]"}, tensor<4x8xi64> {jax.result_info = "result[2]"}) {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<4x8xf64>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f64>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f64>) -> tensor<4x8xf64>
    %2 = stablehlo.add %0, %1 : tensor<4x8xf64>
    %c = stablehlo.constant dense<3> : tensor<i64>
    %3 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i64>) -> tensor<4x8xi64>
    %4 = stablehlo.multiply %arg1, %3 : tensor<4x8xi64>
    %5 = stablehlo.subtract %4, %arg2 : tensor<4x8xi64>
    %6 = stablehlo.maximum %arg1, %arg2 : tensor<4x8xi64>
    return %2, %5, %6 : tensor<4x8xf64>, tensor<4x8xi64>, tensor<4x8xi64>
  }
}
