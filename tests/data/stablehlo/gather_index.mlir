module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<10x6xf32>, %arg1: tensor<4xi32>, %arg2: tensor<3xi32>, %arg3: tensor<3xi32>) -> (tensor<4x6xf32> {jax.result_info = "result[0]"}, tensor<10x2xf32> {jax.result_info = "result[1]"}, tensor<3xf32> {jax.result_info = "result[2]"}, tensor<4x6xf32> {jax.result_info = "result[3]"}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<4xi32>
    %1 = stablehlo.compare LT, %arg1, %0, SIGNED : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
    %c_0 = stablehlo.constant dense<10> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<4xi32>
    %3 = stablehlo.add %arg1, %2 : tensor<4xi32>
    %4 = stablehlo.select %1, %3, %arg1 : tensor<4xi1>, tensor<4xi32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [0] : (tensor<4xi32>) -> tensor<4x1xi32>
    %6 = "stablehlo.gather"(%arg0, %5) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 6>}> : (tensor<10x6xf32>, tensor<4x1xi32>) -> tensor<4x6xf32>
    %7 = stablehlo.slice %arg1 [0:2] : (tensor<4xi32>) -> tensor<2xi32>
    %c_1 = stablehlo.constant dense<0> : tensor<i32>
    %8 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %9 = stablehlo.compare LT, %7, %8, SIGNED : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
    %c_2 = stablehlo.constant dense<6> : tensor<i32>
    %10 = stablehlo.broadcast_in_dim %c_2, dims = [] : (tensor<i32>) -> tensor<2xi32>
    %11 = stablehlo.add %7, %10 : tensor<2xi32>
    %12 = stablehlo.select %9, %11, %7 : tensor<2xi1>, tensor<2xi32>
    %13 = stablehlo.broadcast_in_dim %12, dims = [0] : (tensor<2xi32>) -> tensor<2x1xi32>
    %14 = "stablehlo.gather"(%arg0, %13) <{dimension_numbers = #stablehlo.gather<offset_dims = [0], collapsed_slice_dims = [1], start_index_map = [1], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 10, 1>}> : (tensor<10x6xf32>, tensor<2x1xi32>) -> tensor<10x2xf32>
    %c_3 = stablehlo.constant dense<0> : tensor<i32>
    %15 = stablehlo.broadcast_in_dim %c_3, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %16 = stablehlo.compare LT, %arg2, %15, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %c_4 = stablehlo.constant dense<10> : tensor<i32>
    %17 = stablehlo.broadcast_in_dim %c_4, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %18 = stablehlo.add %arg2, %17 : tensor<3xi32>
    %19 = stablehlo.select %16, %18, %arg2 : tensor<3xi1>, tensor<3xi32>
    %c_5 = stablehlo.constant dense<0> : tensor<i32>
    %20 = stablehlo.broadcast_in_dim %c_5, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %21 = stablehlo.compare LT, %arg3, %20, SIGNED : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %c_6 = stablehlo.constant dense<6> : tensor<i32>
    %22 = stablehlo.broadcast_in_dim %c_6, dims = [] : (tensor<i32>) -> tensor<3xi32>
    %23 = stablehlo.add %arg3, %22 : tensor<3xi32>
    %24 = stablehlo.select %21, %23, %arg3 : tensor<3xi1>, tensor<3xi32>
    %25 = stablehlo.broadcast_in_dim %19, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %26 = stablehlo.broadcast_in_dim %24, dims = [0] : (tensor<3xi32>) -> tensor<3x1xi32>
    %27 = stablehlo.concatenate %25, %26, dim = 1 : (tensor<3x1xi32>, tensor<3x1xi32>) -> tensor<3x2xi32>
    %28 = "stablehlo.gather"(%arg0, %27) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0, 1], start_index_map = [0, 1], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<10x6xf32>, tensor<3x2xi32>) -> tensor<3xf32>
    %29 = call @_take(%arg0, %arg1) : (tensor<10x6xf32>, tensor<4xi32>) -> tensor<4x6xf32>
    return %6, %14, %28, %29 : tensor<4x6xf32>, tensor<10x2xf32>, tensor<3xf32>, tensor<4x6xf32>
  }
  func.func private @_take(%arg0: tensor<10x6xf32>, %arg1: tensor<4xi32>) -> tensor<4x6xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [0] : (tensor<4xi32>) -> tensor<4x1xi32>
    %1 = "stablehlo.gather"(%arg0, %0) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 6>}> : (tensor<10x6xf32>, tensor<4x1xi32>) -> tensor<4x6xf32>
    return %1 : tensor<4x6xf32>
  }
}
