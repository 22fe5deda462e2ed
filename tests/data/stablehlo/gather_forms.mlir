module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x5x6xf32>, %arg1: tensor<3xi32>, %arg2: tensor<3xi32>, %arg3: tensor<4xi32>) -> (tensor<3x5xf32> {jax.result_info = "result[0]"}, tensor<4x3x3xf32> {jax.result_info = "result[1]"}, tensor<4x5x3xf32> {jax.result_info = "result[2]"}, tensor<2x2x6xf32> {jax.result_info = "result[3]"}, tensor<4x2x3xf32> {jax.result_info = "result[4]"}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %1 = stablehlo.compare LT, %arg1, %0, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %c_0 = stablehlo.constant dense<4> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %3 = stablehlo.add %arg1, %2 : tensor<3xi32>
    %4 = stablehlo.select %1, %3, %arg1 : tensor<3xi1>, tensor<3xi32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %5 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %6 = stablehlo.compare LT, %arg2, %5, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %c_2 = stablehlo.constant dense<6> : tensor<i32>
    %7 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %8 = stablehlo.add %arg2, %7 : tensor<3xi32>
    %9 = stablehlo.select %6, %8, %arg2 : tensor<3xi1>, tensor<3xi32>
    %10 = stablehlo.broadcast_in_dim %4, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %11 = stablehlo.broadcast_in_dim %9, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %12 = stablehlo.concatenate %10, %11, dim = 1 : (tensor<3x1xi32>, tensor<3x1xi32>) -> tensor<3x2xi32>
    %13 = "stablehlo.gather"(%arg0, %12) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0, 2], start_index_map = [0, 2], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 5, 1>}> : (tensor<4x5x6xf32>, tensor<3x2xi32>) -> tensor<3x5xf32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %14 = stablehlo.broadcast_in_dim %c_3, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %15 = stablehlo.compare LT, %arg1, %14, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %c_4 = stablehlo.constant dense<5> : tensor<i32>
    %16 = stablehlo.broadcast_in_dim %c_4, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %17 = stablehlo.add %arg1, %16 : tensor<3xi32>
    %18 = stablehlo.select %15, %17, %arg1 : tensor<3xi1>, tensor<3xi32>
    %19 = stablehlo.broadcast_in_dim %18, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %c_5 = stablehlo.constant dense<1> : tensor<i32>
    %20 = stablehlo.broadcast_in_dim %c_5, dims = [] : (tensor<i32>) -> tensor<3x1xi32>
    %21 = stablehlo.concatenate %19, %20, dim = 1 : (tensor<3x1xi32>, tensor<3x1xi32>) -> tensor<3x2xi32>
    %22 = "stablehlo.gather"(%arg0, %21) <{dimension_numbers = #stablehlo.gather<offset_dims = [0, 2], collapsed_slice_dims = [1], start_index_map = [1, 2], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 4, 1, 3>}> : (tensor<4x5x6xf32>, tensor<3x2xi32>) -> tensor<4x3x3xf32>
    %23 = call @_take(%arg0, %arg1) : (tensor<4x5x6xf32>, tensor<3xi32>) -> tensor<4x5x3xf32>
    %24 = stablehlo.slice %arg1 [0:2] : (tensor<3xi32>) -> tensor<2xi32>
    %25 = stablehlo.broadcast_in_dim %24, dims = [0] : (tensor<2xi32>) -> tensor<2x1xi32>
    %26 = stablehlo.slice %arg2 [0:2] : (tensor<3xi32>) -> tensor<2xi32>
    %27 = stablehlo.broadcast_in_dim %26, dims = [1] : (tensor<2xi32>) -> tensor<1x2xi32>
    %c_6 = stablehlo.constant dense<0> : tensor<i32>
    %28 = stablehlo.broadcast_in_dim %c_6, dims = [] : (tensor<i32>) -> tensor<2x1xi32>
    %29 = stablehlo.compare LT, %25, %28, SIGNED : (tensor<2x1xi32>, tensor<2x1xi32>) -> tensor<2x1xi1>
    %c_7 = stablehlo.constant dense<4> : tensor<i32>
    %30 = stablehlo.broadcast_in_dim %c_7, dims = [] : (tensor<i32>) -> tensor<2x1xi32>
    %31 = stablehlo.add %25, %30 : tensor<2x1xi32>
    %32 = stablehlo.select %29, %31, %25 : tensor<2x1xi1>, tensor<2x1xi32>
    %c_8 = stablehlo.constant dense<0> : tensor<i32>
    %33 = stablehlo.broadcast_in_dim %c_8, dims = [] : (tensor<i32>) -> tensor<1x2xi32>
    %34 = stablehlo.compare LT, %27, %33, SIGNED : (tensor<1x2xi32>, tensor<1x2xi32>) -> tensor<1x2xi1>
    %c_9 = stablehlo.constant dense<5> : tensor<i32>
    %35 = stablehlo.broadcast_in_dim %c_9, dims = [] : (tensor<i32>) -> tensor<1x2xi32>
    %36 = stablehlo.add %27, %35 : tensor<1x2xi32>
    %37 = stablehlo.select %34, %36, %27 : tensor<1x2xi1>, tensor<1x2xi32>
    %38 = stablehlo.broadcast_in_dim %32, dims = [0, 1] : (tensor<2x1xi32>) -> tensor<2x2xi32>
    %39 = stablehlo.broadcast_in_dim %37, dims = [0, 1] : (tensor<1x2xi32>) -> tensor<2x2xi32>
    %40 = stablehlo.broadcast_in_dim %38, dims = [0, 1] : (tensor<2x2xi32>) -> tensor<2x2x1xi32>
    %41 = stablehlo.broadcast_in_dim %39, dims = [0, 1] : (tensor<2x2xi32>) -> tensor<2x2x1xi32>
    %42 = stablehlo.concatenate %40, %41, dim = 2 : (tensor<2x2x1xi32>, tensor<2x2x1xi32>) -> tensor<2x2x2xi32>
    %43 = "stablehlo.gather"(%arg0, %42) <{dimension_numbers = #stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [0, 1], start_index_map = [0, 1], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1, 6>}> : (tensor<4x5x6xf32>, tensor<2x2x2xi32>) -> tensor<2x2x6xf32>
    %c_10 = stablehlo.constant dense<0> : tensor<i32>
    %44 = stablehlo.broadcast_in_dim %c_10, dims = [] : (tensor<i32>) -> tensor<4xi32>
    %45 = stablehlo.compare LT, %arg3, %44, SIGNED : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
    %c_11 = stablehlo.constant dense<5> : tensor<i32>
    %46 = stablehlo.broadcast_in_dim %c_11, dims = [] : (tensor<i32>) -> tensor<4xi32>
    %47 = stablehlo.add %arg3, %46 : tensor<4xi32>
    %48 = stablehlo.select %45, %47, %arg3 : tensor<4xi1>, tensor<4xi32>
    %c_12 = stablehlo.constant dense<0> : tensor<i32>
    %49 = stablehlo.broadcast_in_dim %c_12, dims = [] : (tensor<i32>) -> tensor<4xi32>
    %50 = stablehlo.compare LT, %arg3, %49, SIGNED : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
    %c_13 = stablehlo.constant dense<6> : tensor<i32>
    %51 = stablehlo.broadcast_in_dim %c_13, dims = [] : (tensor<i32>) -> tensor<4xi32>
    %52 = stablehlo.add %arg3, %51 : tensor<4xi32>
    %53 = stablehlo.select %50, %52, %arg3 : tensor<4xi1>, tensor<4xi32>
    %54 = stablehlo.broadcast_in_dim %48, dims = [0] : (tensor<4xi32>) -> tensor<4x1xi32>
    %55 = stablehlo.broadcast_in_dim %53, dims = [0] : (tensor<4xi32>) -> tensor<4x1xi32>
    %56 = stablehlo.concatenate %54, %55, dim = 1 : (tensor<4x1xi32>, tensor<4x1xi32>) -> tensor<4x2xi32>
    %57 = "stablehlo.gather"(%arg0, %56) <{dimension_numbers = #stablehlo.gather<offset_dims = [1, 2], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1, 2], index_vector_dim = 1>, indices_are_sorted = true, slice_sizes = array<i64: 1, 2, 3>}> : (tensor<4x5x6xf32>, tensor<4x2xi32>) -> tensor<4x2x3xf32>
    return %13, %22, %23, %43, %57 : tensor<3x5xf32>, tensor<4x3x3xf32>, tensor<4x5x3xf32>, tensor<2x2x6xf32>, tensor<4x2x3xf32>
  }
  func.func private @_take(%arg0: tensor<4x5x6xf32>, %arg1: tensor<3xi32>) -> tensor<4x5x3xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %1 = "stablehlo.gather"(%arg0, %0) <{dimension_numbers = #stablehlo.gather<offset_dims = [0, 1], collapsed_slice_dims = [2], start_index_map = [2], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 4, 5, 1>}> : (tensor<4x5x6xf32>, tensor<3x1xi32>) -> tensor<4x5x3xf32>
    return %1 : tensor<4x5x3xf32>
  }
}
