"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{function_type = (tensor<4x8xf32>, tensor<8x5xf32>, tensor<3x4x6xf32>, tensor<3x6x2xf32>) -> (tensor<4x5xf32>, tensor<3x4x2xf32>, tensor<4x4xf32>, tensor<3xf32>, tensor<f32>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}, {jax.result_info = "result[2]"}, {jax.result_info = "result[3]"}, {jax.result_info = "result[4]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<4x8xf32>, %arg1: tensor<8x5xf32>, %arg2: tensor<3x4x6xf32>, %arg3: tensor<3x6x2xf32>):
    %0 = "stablehlo.dot_general"(%arg0, %arg1) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<4x8xf32>, tensor<8x5xf32>) -> tensor<4x5xf32>
    %1 = "stablehlo.dot_general"(%arg2, %arg3) <{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<3x4x6xf32>, tensor<3x6x2xf32>) -> tensor<3x4x2xf32>
    %2 = "stablehlo.dot_general"(%arg0, %arg0) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
    %3 = "stablehlo.dot_general"(%arg2, %arg2) <{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [1, 2], rhs_contracting_dimensions = [1, 2]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<3x4x6xf32>, tensor<3x4x6xf32>) -> tensor<3xf32>
    %4 = "stablehlo.slice"(%arg1) <{limit_indices = array<i64: 8, 1>, start_indices = array<i64: 0, 0>, strides = array<i64: 1, 1>}> : (tensor<8x5xf32>) -> tensor<8x1xf32>
    %5 = "stablehlo.reshape"(%4) : (tensor<8x1xf32>) -> tensor<8xf32>
    %6 = "stablehlo.slice"(%arg1) <{limit_indices = array<i64: 8, 2>, start_indices = array<i64: 0, 1>, strides = array<i64: 1, 1>}> : (tensor<8x5xf32>) -> tensor<8x1xf32>
    %7 = "stablehlo.reshape"(%6) : (tensor<8x1xf32>) -> tensor<8xf32>
    %8 = "stablehlo.dot_general"(%5, %7) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<8xf32>, tensor<8xf32>) -> tensor<f32>
    "func.return"(%0, %1, %2, %3, %8) : (tensor<4x5xf32>, tensor<3x4x2xf32>, tensor<4x4xf32>, tensor<3xf32>, tensor<f32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
