module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x5x6xf32>, %arg1: tensor<3xi32>, %arg2: tensor<3xi32>, %arg3: tensor<4xi32>, %arg4: tensor<3x2x6xf32>, %arg5: tensor<4x3x6xf32>, %arg6: tensor<4x2x3xf32>, %arg7: tensor<3x5xf32>) -> (tensor<4x5x6xf32> {jax.result_info = "result[0]"}, tensor<4x5x6xf32> {jax.result_info = "result[1]"}, tensor<4x5x6xf32> {jax.result_info = "result[2]"}, tensor<4x5x6xf32> {jax.result_info = "result[3]"}, tensor<4x5x6xf32> {jax.result_info = "result[4]"}, tensor<4x5x6xf32> {jax.result_info = "result[5]"}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %1 = stablehlo.compare LT, %arg1, %0, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %c_0 = stablehlo.constant dense<4> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %3 = stablehlo.add %arg1, %2 : tensor<3xi32>
    %4 = stablehlo.select %1, %3, %arg1 : tensor<3xi1>, tensor<3xi32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %c_1 = stablehlo.constant dense<1> : tensor<i32>
    %6 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<i32>) -> tensor<3x1xi32>
    %7 = stablehlo.concatenate %5, %6, dim = 1 : (tensor<3x1xi32>, tensor<3x1xi32>) -> tensor<3x2xi32>
    %8 = "stablehlo.scatter"(%arg0, %7, %arg4) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1, 2], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg8: tensor<f32>, %arg9: tensor<f32>):
      %73 = stablehlo.add %arg8, %arg9 : tensor<f32>
      stablehlo.return %73 : tensor<f32>
    }) : (tensor<4x5x6xf32>, tensor<3x2xi32>, tensor<3x2x6xf32>) -> tensor<4x5x6xf32>
    %c_2 = stablehlo.constant dense<0> : tensor<i32>
    %9 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %10 = stablehlo.compare LT, %arg1, %9, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %c_3 = stablehlo.constant dense<5> : tensor<i32>
    %11 = stablehlo.broadcast_in_dim %c_3, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %12 = stablehlo.add %arg1, %11 : tensor<3xi32>
    %13 = stablehlo.select %10, %12, %arg1 : tensor<3xi1>, tensor<3xi32>
    %14 = stablehlo.broadcast_in_dim %13, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %15 = "stablehlo.scatter"(%arg0, %14, %arg5) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0, 2], inserted_window_dims = [1], scatter_dims_to_operand_dims = [1], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg8: tensor<f32>, %arg9: tensor<f32>):
      stablehlo.return %arg9 : tensor<f32>
    }) : (tensor<4x5x6xf32>, tensor<3x1xi32>, tensor<4x3x6xf32>) -> tensor<4x5x6xf32>
    %c_4 = stablehlo.constant dense<0> : tensor<i32>
    %16 = stablehlo.broadcast_in_dim %c_4, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %17 = stablehlo.compare LT, %arg1, %16, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %c_5 = stablehlo.constant dense<4> : tensor<i32>
    %18 = stablehlo.broadcast_in_dim %c_5, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %19 = stablehlo.add %arg1, %18 : tensor<3xi32>
    %20 = stablehlo.select %17, %19, %arg1 : tensor<3xi1>, tensor<3xi32>
    %c_6 = stablehlo.constant dense<0> : tensor<i32>
    %21 = stablehlo.broadcast_in_dim %c_6, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %22 = stablehlo.compare LT, %arg2, %21, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %c_7 = stablehlo.constant dense<6> : tensor<i32>
    %23 = stablehlo.broadcast_in_dim %c_7, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %24 = stablehlo.add %arg2, %23 : tensor<3xi32>
    %25 = stablehlo.select %22, %24, %arg2 : tensor<3xi1>, tensor<3xi32>
    %26 = stablehlo.broadcast_in_dim %20, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %27 = stablehlo.broadcast_in_dim %25, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %28 = stablehlo.concatenate %26, %27, dim = 1 : (tensor<3x1xi32>, tensor<3x1xi32>) -> tensor<3x2xi32>
    %29 = "stablehlo.scatter"(%arg0, %28, %arg7) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0, 2], scatter_dims_to_operand_dims = [0, 2], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg8: tensor<f32>, %arg9: tensor<f32>):
      %73 = stablehlo.multiply %arg8, %arg9 : tensor<f32>
      stablehlo.return %73 : tensor<f32>
    }) : (tensor<4x5x6xf32>, tensor<3x2xi32>, tensor<3x5xf32>) -> tensor<4x5x6xf32>
    %30 = stablehlo.slice %arg4 [0:3, 0:1, 0:6] : (tensor<3x2x6xf32>) -> tensor<3x1x6xf32>
    %31 = stablehlo.broadcast_in_dim %30, dims = [0, 1, 2] : (tensor<3x1x6xf32>) -> tensor<3x5x6xf32>
    %c_8 = stablehlo.constant dense<0> : tensor<i32>
    %32 = stablehlo.broadcast_in_dim %c_8, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %33 = stablehlo.compare LT, %arg1, %32, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %c_9 = stablehlo.constant dense<4> : tensor<i32>
    %34 = stablehlo.broadcast_in_dim %c_9, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %35 = stablehlo.add %arg1, %34 : tensor<3xi32>
    %36 = stablehlo.select %33, %35, %arg1 : tensor<3xi1>, tensor<3xi32>
    %37 = stablehlo.broadcast_in_dim %36, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %38 = "stablehlo.scatter"(%arg0, %37, %31) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1, 2], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg8: tensor<f32>, %arg9: tensor<f32>):
      %73 = stablehlo.minimum %arg8, %arg9 : tensor<f32>
      stablehlo.return %73 : tensor<f32>
    }) : (tensor<4x5x6xf32>, tensor<3x1xi32>, tensor<3x5x6xf32>) -> tensor<4x5x6xf32>
    %c_10 = stablehlo.constant dense<0> : tensor<i32>
    %39 = stablehlo.broadcast_in_dim %c_10, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %40 = stablehlo.compare LT, %arg1, %39, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %c_11 = stablehlo.constant dense<4> : tensor<i32>
    %41 = stablehlo.broadcast_in_dim %c_11, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %42 = stablehlo.add %arg1, %41 : tensor<3xi32>
    %43 = stablehlo.select %40, %42, %arg1 : tensor<3xi1>, tensor<3xi32>
    %c_12 = stablehlo.constant dense<0> : tensor<i32>
    %44 = stablehlo.broadcast_in_dim %c_12, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %45 = stablehlo.compare LT, %arg2, %44, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %c_13 = stablehlo.constant dense<6> : tensor<i32>
    %46 = stablehlo.broadcast_in_dim %c_13, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %47 = stablehlo.add %arg2, %46 : tensor<3xi32>
    %48 = stablehlo.select %45, %47, %arg2 : tensor<3xi1>, tensor<3xi32>
    %49 = stablehlo.broadcast_in_dim %43, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %50 = stablehlo.broadcast_in_dim %48, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %51 = stablehlo.concatenate %49, %50, dim = 1 : (tensor<3x1xi32>, tensor<3x1xi32>) -> tensor<3x2xi32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %52 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x5xf32>
    %53 = "stablehlo.scatter"(%arg0, %51, %52) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0, 2], scatter_dims_to_operand_dims = [0, 2], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg8: tensor<f32>, %arg9: tensor<f32>):
      %cst_21 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
      %73 = stablehlo.multiply %arg8, %cst_21 : tensor<f32>
      %cst_22 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %74 = stablehlo.add %73, %cst_22 : tensor<f32>
      stablehlo.return %74 : tensor<f32>
    }) : (tensor<4x5x6xf32>, tensor<3x2xi32>, tensor<3x5xf32>) -> tensor<4x5x6xf32>
    %c_14 = stablehlo.constant dense<0> : tensor<i32>
    %54 = stablehlo.broadcast_in_dim %c_14, dims = [] : (tensor<i32>) -> tensor<4xi32>
    %55 = stablehlo.compare LT, %arg3, %54, SIGNED : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
    %c_15 = stablehlo.constant dense<5> : tensor<i32>
    %56 = stablehlo.broadcast_in_dim %c_15, dims = [] : (tensor<i32>) -> tensor<4xi32>
    %57 = stablehlo.add %arg3, %56 : tensor<4xi32>
    %58 = stablehlo.select %55, %57, %arg3 : tensor<4xi1>, tensor<4xi32>
    %c_16 = stablehlo.constant dense<0> : tensor<i32>
    %59 = stablehlo.broadcast_in_dim %c_16, dims = [] : (tensor<i32>) -> tensor<4xi32>
    %60 = stablehlo.compare LT, %arg3, %59, SIGNED : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
    %c_17 = stablehlo.constant dense<6> : tensor<i32>
    %61 = stablehlo.broadcast_in_dim %c_17, dims = [] : (tensor<i32>) -> tensor<4xi32>
    %62 = stablehlo.add %arg3, %61 : tensor<4xi32>
    %63 = stablehlo.select %60, %62, %arg3 : tensor<4xi1>, tensor<4xi32>
    %64 = stablehlo.broadcast_in_dim %58, dims = [0] : (tensor<4xi32>) -> tensor<4x1xi32>
    %65 = stablehlo.broadcast_in_dim %63, dims = [0] : (tensor<4xi32>) -> tensor<4x1xi32>
    %66 = stablehlo.concatenate %64, %65, dim = 1 : (tensor<4x1xi32>, tensor<4x1xi32>) -> tensor<4x2xi32>
    %c_18 = stablehlo.constant dense<3> : tensor<2xi32>
    %c_19 = stablehlo.constant dense<2147483647> : tensor<i32>
    %67 = stablehlo.broadcast_in_dim %c_19, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %68 = stablehlo.minimum %c_18, %67 : tensor<2xi32>
    %69 = stablehlo.broadcast_in_dim %68, dims = [1] : (tensor<2xi32>) -> tensor<4x2xi32>
    %c_20 = stablehlo.constant dense<0> : tensor<i32>
    %70 = stablehlo.broadcast_in_dim %c_20, dims = [] : (tensor<i32>) -> tensor<4x2xi32>
    %71 = stablehlo.clamp %70, %66, %69 : tensor<4x2xi32>
    %72 = "stablehlo.scatter"(%arg0, %71, %arg6) <{indices_are_sorted = true, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1, 2], input_batching_dims = [0], scatter_indices_batching_dims = [0], scatter_dims_to_operand_dims = [1, 2], index_vector_dim = 1>, unique_indices = true}> ({
    ^bb0(%arg8: tensor<f32>, %arg9: tensor<f32>):
      stablehlo.return %arg9 : tensor<f32>
    }) : (tensor<4x5x6xf32>, tensor<4x2xi32>, tensor<4x2x3xf32>) -> tensor<4x5x6xf32>
    return %8, %15, %29, %38, %53, %72 : tensor<4x5x6xf32>, tensor<4x5x6xf32>, tensor<4x5x6xf32>, tensor<4x5x6xf32>, tensor<4x5x6xf32>, tensor<4x5x6xf32>
  }
}
