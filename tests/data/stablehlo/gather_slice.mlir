module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<10x6xf32>, %arg1: tensor<2xi32>) -> (tensor<1x3x4xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<2xi32>) -> tensor<1x2xi32>
    %1 = "stablehlo.gather"(%arg0, %0) <{dimension_numbers = #stablehlo.gather<offset_dims = [1, 2], start_index_map = [0, 1], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 3, 4>}> : (tensor<10x6xf32>, tensor<1x2xi32>) -> tensor<1x3x4xf32>
    return %1 : tensor<1x3x4xf32>
  }
}
