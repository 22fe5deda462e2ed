module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<9x3xf32>, %arg1: tensor<9xi32>) -> (tensor<5x3xf32> {jax.result_info = "result[0]"}, tensor<5x3xf32> {jax.result_info = "result[1]"}, tensor<5x3xf32> {jax.result_info = "result[2]"}, tensor<5x3xf32> {jax.result_info = "result[3]"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<5x3xf32>
    %1 = stablehlo.broadcast_in_dim %arg1, dims = [0] : (tensor<9xi32>) -> tensor<9x1xi32>
    %2 = "stablehlo.scatter"(%0, %1, %arg0) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %12 = stablehlo.add %arg2, %arg3 : tensor<f32>
      stablehlo.return %12 : tensor<f32>
    }) : (tensor<5x3xf32>, tensor<9x1xi32>, tensor<9x3xf32>) -> tensor<5x3xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<5x3xf32>
    %4 = stablehlo.broadcast_in_dim %arg1, dims = [0] : (tensor<9xi32>) -> tensor<9x1xi32>
    %5 = "stablehlo.scatter"(%3, %4, %arg0) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %12 = stablehlo.maximum %arg2, %arg3 : tensor<f32>
      stablehlo.return %12 : tensor<f32>
    }) : (tensor<5x3xf32>, tensor<9x1xi32>, tensor<9x3xf32>) -> tensor<5x3xf32>
    %cst_1 = stablehlo.constant dense<0x7F800000> : tensor<f32>
    %6 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<5x3xf32>
    %7 = stablehlo.broadcast_in_dim %arg1, dims = [0] : (tensor<9xi32>) -> tensor<9x1xi32>
    %8 = "stablehlo.scatter"(%6, %7, %arg0) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %12 = stablehlo.minimum %arg2, %arg3 : tensor<f32>
      stablehlo.return %12 : tensor<f32>
    }) : (tensor<5x3xf32>, tensor<9x1xi32>, tensor<9x3xf32>) -> tensor<5x3xf32>
    %cst_2 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<5x3xf32>
    %10 = stablehlo.broadcast_in_dim %arg1, dims = [0] : (tensor<9xi32>) -> tensor<9x1xi32>
    %11 = "stablehlo.scatter"(%9, %10, %arg0) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %12 = stablehlo.multiply %arg2, %arg3 : tensor<f32>
      stablehlo.return %12 : tensor<f32>
    }) : (tensor<5x3xf32>, tensor<9x1xi32>, tensor<9x3xf32>) -> tensor<5x3xf32>
    return %2, %5, %8, %11 : tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>
  }
}
