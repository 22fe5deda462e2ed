"builtin.module"() <{sym_name = "jit__lambda"}> ({
  "func.func"() <{function_type = (tensor<4x8xf32>, tensor<4x3xi32>, tensor<3x5x2xf32>, tensor<3x4xi32>) -> (tensor<4x3xf32>, tensor<3x4x2xf32>, tensor<f32>), res_attrs = [{jax.result_info = "result[0]"}, {jax.result_info = "result[1]"}, {jax.result_info = "result[2]"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg13: tensor<4x8xf32>, %arg14: tensor<4x3xi32>, %arg15: tensor<3x5x2xf32>, %arg16: tensor<3x4xi32>):
    %63 = "func.call"(%arg13, %arg14) <{callee = @take_along_axis}> : (tensor<4x8xf32>, tensor<4x3xi32>) -> tensor<4x3xf32>
    %64 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %65 = "stablehlo.broadcast_in_dim"(%64) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<3x4xi32>
    %66 = "stablehlo.compare"(%arg16, %65) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<3x4xi32>, tensor<3x4xi32>) -> tensor<3x4xi1>
    %67 = "stablehlo.constant"() <{value = dense<5> : tensor<i32>}> : () -> tensor<i32>
    %68 = "stablehlo.broadcast_in_dim"(%67) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<3x4xi32>
    %69 = "stablehlo.add"(%arg16, %68) : (tensor<3x4xi32>, tensor<3x4xi32>) -> tensor<3x4xi32>
    %70 = "stablehlo.select"(%66, %69, %arg16) : (tensor<3x4xi1>, tensor<3x4xi32>, tensor<3x4xi32>) -> tensor<3x4xi32>
    %71 = "stablehlo.broadcast_in_dim"(%70) <{broadcast_dimensions = array<i64: 0, 1>}> : (tensor<3x4xi32>) -> tensor<3x4x1xi32>
    %72 = "stablehlo.gather"(%arg15, %71) <{dimension_numbers = #stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1, 2>}> : (tensor<3x5x2xf32>, tensor<3x4x1xi32>) -> tensor<3x4x2xf32>
    %73 = "func.call"(%arg13) <{callee = @log_softmax}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %74 = "stablehlo.slice"(%arg14) <{limit_indices = array<i64: 4, 1>, start_indices = array<i64: 0, 0>, strides = array<i64: 1, 1>}> : (tensor<4x3xi32>) -> tensor<4x1xi32>
    %75 = "func.call"(%73, %74) <{callee = @take_along_axis_0}> : (tensor<4x8xf32>, tensor<4x1xi32>) -> tensor<4x1xf32>
    %76 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %77 = "stablehlo.reduce"(%75, %76) <{dimensions = array<i64: 0, 1>}> ({
    ^bb0(%arg17: tensor<f32>, %arg18: tensor<f32>):
      %81 = "stablehlo.add"(%arg17, %arg18) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%81) : (tensor<f32>) -> ()
    }) : (tensor<4x1xf32>, tensor<f32>) -> tensor<f32>
    %78 = "stablehlo.constant"() <{value = dense<4.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %79 = "stablehlo.divide"(%77, %78) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %80 = "stablehlo.negate"(%79) : (tensor<f32>) -> tensor<f32>
    "func.return"(%63, %72, %80) : (tensor<4x3xf32>, tensor<3x4x2xf32>, tensor<f32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<4x8xf32>, tensor<4x3xi32>) -> tensor<4x3xf32>, sym_name = "take_along_axis", sym_visibility = "private"}> ({
  ^bb0(%arg9: tensor<4x8xf32>, %arg10: tensor<4x3xi32>):
    %40 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %41 = "stablehlo.broadcast_in_dim"(%40) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<4x3xi32>
    %42 = "stablehlo.compare"(%arg10, %41) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<4x3xi32>, tensor<4x3xi32>) -> tensor<4x3xi1>
    %43 = "stablehlo.constant"() <{value = dense<8> : tensor<i32>}> : () -> tensor<i32>
    %44 = "stablehlo.broadcast_in_dim"(%43) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<4x3xi32>
    %45 = "stablehlo.add"(%arg10, %44) : (tensor<4x3xi32>, tensor<4x3xi32>) -> tensor<4x3xi32>
    %46 = "stablehlo.select"(%42, %45, %arg10) : (tensor<4x3xi1>, tensor<4x3xi32>, tensor<4x3xi32>) -> tensor<4x3xi32>
    %47 = "stablehlo.reshape"(%46) : (tensor<4x3xi32>) -> tensor<4x3x1xi32>
    %48 = "stablehlo.constant"() <{value = dense<7> : tensor<1xi32>}> : () -> tensor<1xi32>
    %49 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %50 = "stablehlo.broadcast_in_dim"(%49) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<4x3x1xi32>
    %51 = "stablehlo.compare"(%47, %50) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction GE>}> : (tensor<4x3x1xi32>, tensor<4x3x1xi32>) -> tensor<4x3x1xi1>
    %52 = "stablehlo.broadcast_in_dim"(%48) <{broadcast_dimensions = array<i64: 2>}> : (tensor<1xi32>) -> tensor<1x1x1xi32>
    %53 = "stablehlo.broadcast_in_dim"(%52) <{broadcast_dimensions = array<i64: 0, 1, 2>}> : (tensor<1x1x1xi32>) -> tensor<4x3x1xi32>
    %54 = "stablehlo.compare"(%47, %53) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LE>}> : (tensor<4x3x1xi32>, tensor<4x3x1xi32>) -> tensor<4x3x1xi1>
    %55 = "stablehlo.and"(%51, %54) : (tensor<4x3x1xi1>, tensor<4x3x1xi1>) -> tensor<4x3x1xi1>
    %56 = "stablehlo.constant"() <{value = dense<true> : tensor<i1>}> : () -> tensor<i1>
    %57 = "stablehlo.reduce"(%55, %56) <{dimensions = array<i64: 2>}> ({
    ^bb0(%arg11: tensor<i1>, %arg12: tensor<i1>):
      %62 = "stablehlo.and"(%arg11, %arg12) : (tensor<i1>, tensor<i1>) -> tensor<i1>
      "stablehlo.return"(%62) : (tensor<i1>) -> ()
    }) : (tensor<4x3x1xi1>, tensor<i1>) -> tensor<4x3xi1>
    %58 = "stablehlo.gather"(%arg9, %47) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<4x8xf32>, tensor<4x3x1xi32>) -> tensor<4x3xf32>
    %59 = "stablehlo.constant"() <{value = dense<0x7FC00000> : tensor<f32>}> : () -> tensor<f32>
    %60 = "stablehlo.broadcast_in_dim"(%59) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<4x3xf32>
    %61 = "stablehlo.select"(%57, %58, %60) : (tensor<4x3xi1>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    "func.return"(%61) : (tensor<4x3xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<4x8xf32>) -> tensor<4x8xf32>, sym_name = "log_softmax", sym_visibility = "private"}> ({
  ^bb0(%arg4: tensor<4x8xf32>):
    %23 = "stablehlo.constant"() <{value = dense<0xFF800000> : tensor<f32>}> : () -> tensor<f32>
    %24 = "stablehlo.reduce"(%arg4, %23) <{dimensions = array<i64: 1>}> ({
    ^bb0(%arg7: tensor<f32>, %arg8: tensor<f32>):
      %39 = "stablehlo.maximum"(%arg7, %arg8) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%39) : (tensor<f32>) -> ()
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    %25 = "stablehlo.constant"() <{value = dense<0xFF800000> : tensor<f32>}> : () -> tensor<f32>
    %26 = "stablehlo.broadcast_in_dim"(%25) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<4xf32>
    %27 = "stablehlo.maximum"(%26, %24) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %28 = "stablehlo.broadcast_in_dim"(%27) <{broadcast_dimensions = array<i64: 0>}> : (tensor<4xf32>) -> tensor<4x1xf32>
    %29 = "stablehlo.broadcast_in_dim"(%28) <{broadcast_dimensions = array<i64: 0, 1>}> : (tensor<4x1xf32>) -> tensor<4x8xf32>
    %30 = "stablehlo.subtract"(%arg4, %29) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %31 = "stablehlo.exponential"(%30) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %32 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %33 = "stablehlo.reduce"(%31, %32) <{dimensions = array<i64: 1>}> ({
    ^bb0(%arg5: tensor<f32>, %arg6: tensor<f32>):
      %38 = "stablehlo.add"(%arg5, %arg6) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%38) : (tensor<f32>) -> ()
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
    %34 = "stablehlo.broadcast_in_dim"(%33) <{broadcast_dimensions = array<i64: 0>}> : (tensor<4xf32>) -> tensor<4x1xf32>
    %35 = "stablehlo.log"(%34) : (tensor<4x1xf32>) -> tensor<4x1xf32>
    %36 = "stablehlo.broadcast_in_dim"(%35) <{broadcast_dimensions = array<i64: 0, 1>}> : (tensor<4x1xf32>) -> tensor<4x8xf32>
    %37 = "stablehlo.subtract"(%30, %36) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    "func.return"(%37) : (tensor<4x8xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<4x8xf32>, tensor<4x1xi32>) -> tensor<4x1xf32>, sym_name = "take_along_axis_0", sym_visibility = "private"}> ({
  ^bb0(%arg0: tensor<4x8xf32>, %arg1: tensor<4x1xi32>):
    %0 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %1 = "stablehlo.broadcast_in_dim"(%0) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<4x1xi32>
    %2 = "stablehlo.compare"(%arg1, %1) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<4x1xi32>, tensor<4x1xi32>) -> tensor<4x1xi1>
    %3 = "stablehlo.constant"() <{value = dense<8> : tensor<i32>}> : () -> tensor<i32>
    %4 = "stablehlo.broadcast_in_dim"(%3) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<4x1xi32>
    %5 = "stablehlo.add"(%arg1, %4) : (tensor<4x1xi32>, tensor<4x1xi32>) -> tensor<4x1xi32>
    %6 = "stablehlo.select"(%2, %5, %arg1) : (tensor<4x1xi1>, tensor<4x1xi32>, tensor<4x1xi32>) -> tensor<4x1xi32>
    %7 = "stablehlo.reshape"(%6) : (tensor<4x1xi32>) -> tensor<4x1x1xi32>
    %8 = "stablehlo.constant"() <{value = dense<7> : tensor<1xi32>}> : () -> tensor<1xi32>
    %9 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %10 = "stablehlo.broadcast_in_dim"(%9) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<4x1x1xi32>
    %11 = "stablehlo.compare"(%7, %10) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction GE>}> : (tensor<4x1x1xi32>, tensor<4x1x1xi32>) -> tensor<4x1x1xi1>
    %12 = "stablehlo.broadcast_in_dim"(%8) <{broadcast_dimensions = array<i64: 2>}> : (tensor<1xi32>) -> tensor<1x1x1xi32>
    %13 = "stablehlo.broadcast_in_dim"(%12) <{broadcast_dimensions = array<i64: 0, 1, 2>}> : (tensor<1x1x1xi32>) -> tensor<4x1x1xi32>
    %14 = "stablehlo.compare"(%7, %13) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction LE>}> : (tensor<4x1x1xi32>, tensor<4x1x1xi32>) -> tensor<4x1x1xi1>
    %15 = "stablehlo.and"(%11, %14) : (tensor<4x1x1xi1>, tensor<4x1x1xi1>) -> tensor<4x1x1xi1>
    %16 = "stablehlo.constant"() <{value = dense<true> : tensor<i1>}> : () -> tensor<i1>
    %17 = "stablehlo.reduce"(%15, %16) <{dimensions = array<i64: 2>}> ({
    ^bb0(%arg2: tensor<i1>, %arg3: tensor<i1>):
      %22 = "stablehlo.and"(%arg2, %arg3) : (tensor<i1>, tensor<i1>) -> tensor<i1>
      "stablehlo.return"(%22) : (tensor<i1>) -> ()
    }) : (tensor<4x1x1xi1>, tensor<i1>) -> tensor<4x1xi1>
    %18 = "stablehlo.gather"(%arg0, %7) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2>, indices_are_sorted = false, slice_sizes = array<i64: 1, 1>}> : (tensor<4x8xf32>, tensor<4x1x1xi32>) -> tensor<4x1xf32>
    %19 = "stablehlo.constant"() <{value = dense<0x7FC00000> : tensor<f32>}> : () -> tensor<f32>
    %20 = "stablehlo.broadcast_in_dim"(%19) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<4x1xf32>
    %21 = "stablehlo.select"(%17, %18, %20) : (tensor<4x1xi1>, tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
    "func.return"(%21) : (tensor<4x1xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
