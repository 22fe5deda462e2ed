module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<5x8xf32>, %arg1: tensor<4x8xf16>) -> (tensor<5x8xf32> {jax.result_info = "result[0]"}, tensor<5x8xf32> {jax.result_info = "result[1]"}, tensor<5x8xf32> {jax.result_info = "result[2]"}, tensor<5x8xf32> {jax.result_info = "result[3]"}, tensor<4x8xf16> {jax.result_info = "result[4]"}, tensor<5x8xf32> {jax.result_info = "result[5]"}) {
    %0 = stablehlo.reduce_precision %arg0, format = e4m3 : tensor<5x8xf32>
    %1 = stablehlo.reduce_precision %arg0, format = e5m2 : tensor<5x8xf32>
    %cst = stablehlo.constant dense<1.000000e+30> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<5x8xf32>
    %3 = stablehlo.multiply %arg0, %2 : tensor<5x8xf32>
    %4 = stablehlo.reduce_precision %3, format = e8m7 : tensor<5x8xf32>
    %cst_0 = stablehlo.constant dense<1.000000e-03> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<5x8xf32>
    %6 = stablehlo.multiply %arg0, %5 : tensor<5x8xf32>
    %7 = stablehlo.reduce_precision %6, format = e5m10 : tensor<5x8xf32>
    %8 = stablehlo.reduce_precision %arg1, format = e4m3 : tensor<4x8xf16>
    %9 = stablehlo.reduce_precision %arg0, format = e2m1 : tensor<5x8xf32>
    return %0, %1, %4, %7, %8, %9 : tensor<5x8xf32>, tensor<5x8xf32>, tensor<5x8xf32>, tensor<5x8xf32>, tensor<4x8xf16>, tensor<5x8xf32>
  }
}
