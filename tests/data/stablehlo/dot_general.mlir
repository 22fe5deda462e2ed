module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x8xf32>, %arg1: tensor<8x5xf32>, %arg2: tensor<3x4x6xf32>, %arg3: tensor<3x6x2xf32>) -> (tensor<4x5xf32> {jax.result_info = "result[0]"}, tensor<3x4x2xf32> {jax.result_info = "result[1]"}, tensor<4x4xf32> {jax.result_info = "result[2]"}, tensor<3xf32> {jax.result_info = "result[3]"}, tensor<f32> {jax.result_info = "result[4]"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<4x8xf32>, tensor<8x5xf32>) -> tensor<4x5xf32>
    %1 = stablehlo.dot_general %arg2, %arg3, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<3x4x6xf32>, tensor<3x6x2xf32>) -> tensor<3x4x2xf32>
    %2 = stablehlo.dot_general %arg0, %arg0, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
    %3 = stablehlo.dot_general %arg2, %arg2, batching_dims = [0] x [0], contracting_dims = [1, 2] x [1, 2], precision = [DEFAULT, DEFAULT] : (tensor<3x4x6xf32>, tensor<3x4x6xf32>) -> tensor<3xf32>
    %4 = stablehlo.slice %arg1 [0:8, 0:1] : (tensor<8x5xf32>) -> tensor<8x1xf32>
    %5 = stablehlo.reshape %4 : (tensor<8x1xf32>) -> tensor<8xf32>
    %6 = stablehlo.slice %arg1 [0:8, 1:2] : (tensor<8x5xf32>) -> tensor<8x1xf32>
    %7 = stablehlo.reshape %6 : (tensor<8x1xf32>) -> tensor<8xf32>
    %8 = stablehlo.dot_general %5, %7, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8xf32>, tensor<8xf32>) -> tensor<f32>
    return %0, %1, %2, %3, %8 : tensor<4x5xf32>, tensor<3x4x2xf32>, tensor<4x4xf32>, tensor<3xf32>, tensor<f32>
  }
}
