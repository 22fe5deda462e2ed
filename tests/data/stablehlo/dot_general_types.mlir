module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xbf16>, %arg1: tensor<8x3xbf16>, %arg2: tensor<3x4xi32>, %arg3: tensor<4x2xi32>) -> (tensor<4x3xf32> {jax.result_info = "result[0]"}, tensor<3x2xi32> {jax.result_info = "result[1]"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<4x8xbf16>, tensor<8x3xbf16>) -> tensor<4x3xf32>
    %1 = stablehlo.dot_general %arg2, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<3x4xi32>, tensor<4x2xi32>) -> tensor<3x2xi32>
    return %0, %1 : tensor<4x3xf32>, tensor<3x2xi32>
  }
}
