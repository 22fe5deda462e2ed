"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{function_type = (tensor<10x6xf32>, tensor<4xi32>, tensor<3xi32>, tensor<3xi32>) -> (tensor<4x6xf32>, tensor<10x2xf32>, tensor<3xf32>, tensor<4x6xf32>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}, {jax.result_info = "result[2]"}, {jax.result_info = "result[3]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg2: tensor<10x6xf32>, %arg3: tensor<4xi32>, %arg4: tensor<3xi32>, %arg5: tensor<3xi32>):
    %2 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %3 = "stablehlo.broadcast_in_dim"(%2) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<4xi32>
    %4 = "stablehlo.compare"(%arg3, %3) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi1>
    %5 = "stablehlo.constant"() <{value = dense<10> : tensor<i32>}> : () -> tensor<i32>
    %6 = "stablehlo.broadcast_in_dim"(%5) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<4xi32>
    %7 = "stablehlo.add"(%arg3, %6) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    %8 = "stablehlo.select"(%4, %7, %arg3) : (tensor<4xi1>, tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    %9 = "stablehlo.broadcast_in_dim"(%8) <{broadcast_dimensions = array<i64: 0>}> : (tensor<4xi32>) -> tensor<4x1xi32>
    %10 = "stablehlo.gather"(%arg2, %9) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 6>}> : (tensor<10x6xf32>, tensor<4x1xi32>) -> tensor<4x6xf32>
    %11 = "stablehlo.slice"(%arg3) <{limit_indices = array<i64: 2>, start_indices = array<i64: 0>, strides = array<i64: 1>}> : (tensor<4xi32>) -> tensor<2xi32>
    %12 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %13 = "stablehlo.broadcast_in_dim"(%12) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<2xi32>
    %14 = "stablehlo.compare"(%11, %13) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
    %15 = "stablehlo.constant"() <{value = dense<6> : tensor<i32>}> : () -> tensor<i32>
    %16 = "stablehlo.broadcast_in_dim"(%15) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<2xi32>
    %17 = "stablehlo.add"(%11, %16) : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
    %18 = "stablehlo.select"(%14, %17, %11) : (tensor<2xi1>, tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
    %19 = "stablehlo.broadcast_in_dim"(%18) <{broadcast_dimensions = array<i64: 0>}> : (tensor<2xi32>) -> tensor<2x1xi32>
    %20 = "stablehlo.gather"(%arg2, %19) <{dimension_numbers = #stablehlo.gather<offset_dims = [0], collapsed_slice_dims = [1], start_index_map = [1], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 10, 1>}> : (tensor<10x6xf32>, tensor<2x1xi32>) -> tensor<10x2xf32>
    %21 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %22 = "stablehlo.broadcast_in_dim"(%21) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<3xi32>
    %23 = "stablehlo.compare"(%arg4, %22) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %24 = "stablehlo.constant"() <{value = dense<10> : tensor<i32>}> : () -> tensor<i32>
    %25 = "stablehlo.broadcast_in_dim"(%24) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<3xi32>
    %26 = "stablehlo.add"(%arg4, %25) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
    %27 = "stablehlo.select"(%23, %26, %arg4) : (tensor<3xi1>, tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
    %28 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %29 = "stablehlo.broadcast_in_dim"(%28) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<3xi32>
    %30 = "stablehlo.compare"(%arg5, %29) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %31 = "stablehlo.constant"() <{value = dense<6> : tensor<i32>}> : () -> tensor<i32>
    %32 = "stablehlo.broadcast_in_dim"(%31) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<3xi32>
    %33 = "stablehlo.add"(%arg5, %32) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
    %34 = "stablehlo.select"(%30, %33, %arg5) : (tensor<3xi1>, tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
    %35 = "stablehlo.broadcast_in_dim"(%27) <{broadcast_dimensions = array<i64: 0>}> : (tensor<3xi32>) -> tensor<3x1xi32>
    %36 = "stablehlo.broadcast_in_dim"(%34) <{broadcast_dimensions = array<i64: 0>}> : (tensor<3xi32>) -> tensor<3x1xi32>
    %37 = "stablehlo.concatenate"(%35, %36) <{dimension = 1 : i64}> : (tensor<3x1xi32>, tensor<3x1xi32>) -> tensor<3x2xi32>
    %38 = "stablehlo.gather"(%arg2, %37) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0, 1], start_index_map = [0, 1], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<10x6xf32>, tensor<3x2xi32>) -> tensor<3xf32>
    %39 = "func.call"(%arg2, %arg3) <{callee = @_take}> : (tensor<10x6xf32>, tensor<4xi32>) -> tensor<4x6xf32>
    "func.return"(%10, %20, %38, %39) : (tensor<4x6xf32>, tensor<10x2xf32>, tensor<3xf32>, tensor<4x6xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<10x6xf32>, tensor<4xi32>) -> tensor<4x6xf32>, sym_name = "_take", sym_visibility = "private"}> ({
  ^bb0(%arg0: tensor<10x6xf32>, %arg1: tensor<4xi32>):
    %0 = "stablehlo.broadcast_in_dim"(%arg1) <{broadcast_dimensions = array<i64: 0>}> : (tensor<4xi32>) -> tensor<4x1xi32>
    %1 = "stablehlo.gather"(%arg0, %0) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 6>}> : (tensor<10x6xf32>, tensor<4x1xi32>) -> tensor<4x6xf32>
    "func.return"(%1) : (tensor<4x6xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
