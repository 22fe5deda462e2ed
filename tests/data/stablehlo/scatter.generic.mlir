"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{function_type = (tensor<10x6xf32>, tensor<3xi32>, tensor<3x6xf32>, tensor<10x2xf32>) -> (tensor<10x6xf32>, tensor<10x6xf32>, tensor<10x6xf32>, tensor<10x6xf32>, tensor<10x6xf32>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}, {jax.result_info = "result[2]"}, {jax.result_info = "result[3]"}, {jax.result_info = "result[4]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<10x6xf32>, %arg1: tensor<3xi32>, %arg2: tensor<3x6xf32>, %arg3: tensor<10x2xf32>):
    %0 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %1 = "stablehlo.broadcast_in_dim"(%0) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<3xi32>
    %2 = "stablehlo.compare"(%arg1, %1) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %3 = "stablehlo.constant"() <{value = dense<10> : tensor<i32>}> : () -> tensor<i32>
    %4 = "stablehlo.broadcast_in_dim"(%3) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<3xi32>
    %5 = "stablehlo.add"(%arg1, %4) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
    %6 = "stablehlo.select"(%2, %5, %arg1) : (tensor<3xi1>, tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
    %7 = "stablehlo.broadcast_in_dim"(%6) <{broadcast_dimensions = array<i64: 0>}> : (tensor<3xi32>) -> tensor<3x1xi32>
    %8 = "stablehlo.scatter"(%arg0, %7, %arg2) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg12: tensor<f32>, %arg13: tensor<f32>):
      "stablehlo.return"(%arg13) : (tensor<f32>) -> ()
    }) : (tensor<10x6xf32>, tensor<3x1xi32>, tensor<3x6xf32>) -> tensor<10x6xf32>
    %9 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %10 = "stablehlo.broadcast_in_dim"(%9) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<3xi32>
    %11 = "stablehlo.compare"(%arg1, %10) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %12 = "stablehlo.constant"() <{value = dense<10> : tensor<i32>}> : () -> tensor<i32>
    %13 = "stablehlo.broadcast_in_dim"(%12) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<3xi32>
    %14 = "stablehlo.add"(%arg1, %13) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
    %15 = "stablehlo.select"(%11, %14, %arg1) : (tensor<3xi1>, tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
    %16 = "stablehlo.broadcast_in_dim"(%15) <{broadcast_dimensions = array<i64: 0>}> : (tensor<3xi32>) -> tensor<3x1xi32>
    %17 = "stablehlo.scatter"(%arg0, %16, %arg2) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg10: tensor<f32>, %arg11: tensor<f32>):
      %49 = "stablehlo.add"(%arg10, %arg11) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%49) : (tensor<f32>) -> ()
    }) : (tensor<10x6xf32>, tensor<3x1xi32>, tensor<3x6xf32>) -> tensor<10x6xf32>
    %18 = "stablehlo.slice"(%arg1) <{limit_indices = array<i64: 2>, start_indices = array<i64: 0>, strides = array<i64: 1>}> : (tensor<3xi32>) -> tensor<2xi32>
    %19 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %20 = "stablehlo.broadcast_in_dim"(%19) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<2xi32>
    %21 = "stablehlo.compare"(%18, %20) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
    %22 = "stablehlo.constant"() <{value = dense<6> : tensor<i32>}> : () -> tensor<i32>
    %23 = "stablehlo.broadcast_in_dim"(%22) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<2xi32>
    %24 = "stablehlo.add"(%18, %23) : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
    %25 = "stablehlo.select"(%21, %24, %18) : (tensor<2xi1>, tensor<2xi32>, tensor<2xi32>) -> tensor<2xi32>
    %26 = "stablehlo.broadcast_in_dim"(%25) <{broadcast_dimensions = array<i64: 0>}> : (tensor<2xi32>) -> tensor<2x1xi32>
    %27 = "stablehlo.scatter"(%arg0, %26, %arg3) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0], inserted_window_dims = [1], scatter_dims_to_operand_dims = [1], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg8: tensor<f32>, %arg9: tensor<f32>):
      %48 = "stablehlo.add"(%arg8, %arg9) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%48) : (tensor<f32>) -> ()
    }) : (tensor<10x6xf32>, tensor<2x1xi32>, tensor<10x2xf32>) -> tensor<10x6xf32>
    %28 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %29 = "stablehlo.broadcast_in_dim"(%28) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<3xi32>
    %30 = "stablehlo.compare"(%arg1, %29) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %31 = "stablehlo.constant"() <{value = dense<10> : tensor<i32>}> : () -> tensor<i32>
    %32 = "stablehlo.broadcast_in_dim"(%31) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<3xi32>
    %33 = "stablehlo.add"(%arg1, %32) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
    %34 = "stablehlo.select"(%30, %33, %arg1) : (tensor<3xi1>, tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
    %35 = "stablehlo.broadcast_in_dim"(%34) <{broadcast_dimensions = array<i64: 0>}> : (tensor<3xi32>) -> tensor<3x1xi32>
    %36 = "stablehlo.scatter"(%arg0, %35, %arg2) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg6: tensor<f32>, %arg7: tensor<f32>):
      %47 = "stablehlo.maximum"(%arg6, %arg7) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%47) : (tensor<f32>) -> ()
    }) : (tensor<10x6xf32>, tensor<3x1xi32>, tensor<3x6xf32>) -> tensor<10x6xf32>
    %37 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %38 = "stablehlo.broadcast_in_dim"(%37) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<3xi32>
    %39 = "stablehlo.compare"(%arg1, %38) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi1>
    %40 = "stablehlo.constant"() <{value = dense<10> : tensor<i32>}> : () -> tensor<i32>
    %41 = "stablehlo.broadcast_in_dim"(%40) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<3xi32>
    %42 = "stablehlo.add"(%arg1, %41) : (tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
    %43 = "stablehlo.select"(%39, %42, %arg1) : (tensor<3xi1>, tensor<3xi32>, tensor<3xi32>) -> tensor<3xi32>
    %44 = "stablehlo.broadcast_in_dim"(%43) <{broadcast_dimensions = array<i64: 0>}> : (tensor<3xi32>) -> tensor<3x1xi32>
    %45 = "stablehlo.scatter"(%arg0, %44, %arg2) <{indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
    ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
      %46 = "stablehlo.multiply"(%arg4, %arg5) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%46) : (tensor<f32>) -> ()
    }) : (tensor<10x6xf32>, tensor<3x1xi32>, tensor<3x6xf32>) -> tensor<10x6xf32>
    "func.return"(%8, %17, %27, %36, %45) : (tensor<10x6xf32>, tensor<10x6xf32>, tensor<10x6xf32>, tensor<10x6xf32>, tensor<10x6xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
