module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<10x6xf32>, %arg1: tensor<3xi32>, %arg2: tensor<3x6xf32>, %arg3: tensor<10x2xf32>) -> (tensor<10x6xf32> {jax.result_info = "result[0]"}, tensor<10x6xf32> {jax.result_info = "result[1]"}, tensor<10x6xf32> {jax.result_info = "result[2]"}, tensor<10x6xf32> {jax.result_info = "result[3]"}, tensor<10x6xf32> {jax.result_info = "result[4]"}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %1 = stablehlo.compare LT, %arg1, %0, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %c_0 = stablehlo.constant dense<10> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %3 = stablehlo.add %arg1, %2 : tensor<3xi32>
    %4 = stablehlo.select %1, %3, %arg1 : tensor<3xi1>, tensor<3xi32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %6 = "stablehlo.scatter"(%arg0, %5, %arg2) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
      stablehlo.return %arg5 : tensor<f32>
    }) : (tensor<10x6xf32>, tensor<3x1xi32>, tensor<3x6xf32>) -> tensor<10x6xf32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %7 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %8 = stablehlo.compare LT, %arg1, %7, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %c_2 = stablehlo.constant dense<10> : tensor<i32>
    %9 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %10 = stablehlo.add %arg1, %9 : tensor<3xi32>
    %11 = stablehlo.select %8, %10, %arg1 : tensor<3xi1>, tensor<3xi32>
    %12 = stablehlo.broadcast_in_dim %11, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %13 = "stablehlo.scatter"(%arg0, %12, %arg2) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
      %36 = stablehlo.add %arg4, %arg5 : tensor<f32>
      stablehlo.return %36 : tensor<f32>
    }) : (tensor<10x6xf32>, tensor<3x1xi32>, tensor<3x6xf32>) -> tensor<10x6xf32>
    %14 = stablehlo.slice %arg1 [0:2] : (tensor<3xi32>) -> tensor<2xi32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %15 = stablehlo.broadcast_in_dim %c_3, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %16 = stablehlo.compare LT, %14, %15, SIGNED : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
    %c_4 = stablehlo.constant dense<6> : tensor<i32>
    %17 = stablehlo.broadcast_in_dim %c_4, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %18 = stablehlo.add %14, %17 : tensor<2xi32>
    %19 = stablehlo.select %16, %18, %14 : tensor<2xi1>, tensor<2xi32>
    %20 = stablehlo.broadcast_in_dim %19, dims = [0] : (tensor<2xi32>) -> tensor<2x1xi32>
    %21 = "stablehlo.scatter"(%arg0, %20, %arg3) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0], inserted_window_dims = [1], scatter_dims_to_operand_dims = [1], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
      %36 = stablehlo.add %arg4, %arg5 : tensor<f32>
      stablehlo.return %36 : tensor<f32>
    }) : (tensor<10x6xf32>, tensor<2x1xi32>, tensor<10x2xf32>) -> tensor<10x6xf32>
    %c_5 = stablehlo.constant dense<0> : tensor<i32>
    %22 = stablehlo.broadcast_in_dim %c_5, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %23 = stablehlo.compare LT, %arg1, %22, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %c_6 = stablehlo.constant dense<10> : tensor<i32>
    %24 = stablehlo.broadcast_in_dim %c_6, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %25 = stablehlo.add %arg1, %24 : tensor<3xi32>
    %26 = stablehlo.select %23, %25, %arg1 : tensor<3xi1>, tensor<3xi32>
    %27 = stablehlo.broadcast_in_dim %26, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %28 = "stablehlo.scatter"(%arg0, %27, %arg2) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
      %36 = stablehlo.maximum %arg4, %arg5 : tensor<f32>
      stablehlo.return %36 : tensor<f32>
    }) : (tensor<10x6xf32>, tensor<3x1xi32>, tensor<3x6xf32>) -> tensor<10x6xf32>
    %c_7 = stablehlo.constant dense<0> : tensor<i32>
    %29 = stablehlo.broadcast_in_dim %c_7, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %30 = stablehlo.compare LT, %arg1, %29, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %c_8 = stablehlo.constant dense<10> : tensor<i32>
    %31 = stablehlo.broadcast_in_dim %c_8, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %32 = stablehlo.add %arg1, %31 : tensor<3xi32>
    %33 = stablehlo.select %30, %32, %arg1 : tensor<3xi1>, tensor<3xi32>
    %34 = stablehlo.broadcast_in_dim %33, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %35 = "stablehlo.scatter"(%arg0, %34, %arg2) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
      %36 = stablehlo.multiply %arg4, %arg5 : tensor<f32>
      stablehlo.return %36 : tensor<f32>
    }) : (tensor<10x6xf32>, tensor<3x1xi32>, tensor<3x6xf32>) -> tensor<10x6xf32>
    return %6, %13, %21, %28, %35 : tensor<10x6xf32>, tensor<10x6xf32>, tensor<10x6xf32>, tensor<10x6xf32>, tensor<10x6xf32>
  }
}
