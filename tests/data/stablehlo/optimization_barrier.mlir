module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf32>) -> (tensor<4x8xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %0:2 = stablehlo.optimization_barrier %arg0, %cst : tensor<4x8xf32>, tensor<f32>
    %1 = stablehlo.cosine %0#0 : tensor<4x8xf32>
    %2 = stablehlo.broadcast_in_dim %0#1, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
    %3 = stablehlo.multiply %2, %1 : tensor<4x8xf32>
    return %3 : tensor<4x8xf32>
  }
}
