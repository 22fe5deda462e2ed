"builtin.module"() <{sym_name = "jit_attention_block"}> ({
  "func.func"() <{function_type = (tensor<1x16x64xf32>, tensor<64xf32>, tensor<192xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>, tensor<64x192xf32>) -> tensor<1x16x64xf32>, res_attrs = [{jax.result_info = "result"}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg4: tensor<1x16x64xf32>, %arg5: tensor<64xf32>, %arg6: tensor<192xf32>, %arg7: tensor<64xf32>, %arg8: tensor<64xf32>, %arg9: tensor<64x64xf32>, %arg10: tensor<64x192xf32>):
    %12 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %13 = "stablehlo.reduce"(%arg4, %12) <{dimensions = array<i64: 2>}> ({
    ^bb0(%arg17: tensor<f32>, %arg18: tensor<f32>):
      %91 = "stablehlo.add"(%arg17, %arg18) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%91) : (tensor<f32>) -> ()
    }) : (tensor<1x16x64xf32>, tensor<f32>) -> tensor<1x16xf32>
    %14 = "stablehlo.broadcast_in_dim"(%13) <{broadcast_dimensions = array<i64: 0, 1>}> : (tensor<1x16xf32>) -> tensor<1x16x1xf32>
    %15 = "stablehlo.constant"() <{value = dense<6.400000e+01> : tensor<f32>}> : () -> tensor<f32>
    %16 = "stablehlo.broadcast_in_dim"(%15) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<1x16x1xf32>
    %17 = "stablehlo.divide"(%14, %16) : (tensor<1x16x1xf32>, tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
    %18 = "stablehlo.broadcast_in_dim"(%17) <{broadcast_dimensions = array<i64: 0, 1, 2>}> : (tensor<1x16x1xf32>) -> tensor<1x16x64xf32>
    %19 = "stablehlo.subtract"(%arg4, %18) : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
    %20 = "chlo.square"(%19) : (tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
    %21 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %22 = "stablehlo.reduce"(%20, %21) <{dimensions = array<i64: 2>}> ({
    ^bb0(%arg15: tensor<f32>, %arg16: tensor<f32>):
      %90 = "stablehlo.add"(%arg15, %arg16) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%90) : (tensor<f32>) -> ()
    }) : (tensor<1x16x64xf32>, tensor<f32>) -> tensor<1x16xf32>
    %23 = "stablehlo.broadcast_in_dim"(%22) <{broadcast_dimensions = array<i64: 0, 1>}> : (tensor<1x16xf32>) -> tensor<1x16x1xf32>
    %24 = "stablehlo.constant"() <{value = dense<6.400000e+01> : tensor<f32>}> : () -> tensor<f32>
    %25 = "stablehlo.broadcast_in_dim"(%24) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<1x16x1xf32>
    %26 = "stablehlo.divide"(%23, %25) : (tensor<1x16x1xf32>, tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
    %27 = "stablehlo.broadcast_in_dim"(%17) <{broadcast_dimensions = array<i64: 0, 1, 2>}> : (tensor<1x16x1xf32>) -> tensor<1x16x64xf32>
    %28 = "stablehlo.subtract"(%arg4, %27) : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
    %29 = "stablehlo.constant"() <{value = dense<9.99999974E-6> : tensor<f32>}> : () -> tensor<f32>
    %30 = "stablehlo.broadcast_in_dim"(%29) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<1x16x1xf32>
    %31 = "stablehlo.add"(%26, %30) : (tensor<1x16x1xf32>, tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
    %32 = "stablehlo.sqrt"(%31) : (tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
    %33 = "stablehlo.constant"() <{value = dense<1.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %34 = "stablehlo.broadcast_in_dim"(%33) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<1x16x1xf32>
    %35 = "stablehlo.divide"(%34, %32) : (tensor<1x16x1xf32>, tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
    %36 = "stablehlo.broadcast_in_dim"(%35) <{broadcast_dimensions = array<i64: 0, 1, 2>}> : (tensor<1x16x1xf32>) -> tensor<1x16x64xf32>
    %37 = "stablehlo.multiply"(%28, %36) : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
    %38 = "stablehlo.broadcast_in_dim"(%arg8) <{broadcast_dimensions = array<i64: 2>}> : (tensor<64xf32>) -> tensor<1x1x64xf32>
    %39 = "stablehlo.broadcast_in_dim"(%38) <{broadcast_dimensions = array<i64: 0, 1, 2>}> : (tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
    %40 = "stablehlo.multiply"(%37, %39) : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
    %41 = "stablehlo.broadcast_in_dim"(%arg7) <{broadcast_dimensions = array<i64: 2>}> : (tensor<64xf32>) -> tensor<1x1x64xf32>
    %42 = "stablehlo.broadcast_in_dim"(%41) <{broadcast_dimensions = array<i64: 0, 1, 2>}> : (tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
    %43 = "stablehlo.add"(%40, %42) : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
    %44 = "stablehlo.dot_general"(%43, %arg10) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<1x16x64xf32>, tensor<64x192xf32>) -> tensor<1x16x192xf32>
    %45 = "stablehlo.broadcast_in_dim"(%arg6) <{broadcast_dimensions = array<i64: 2>}> : (tensor<192xf32>) -> tensor<1x1x192xf32>
    %46 = "stablehlo.broadcast_in_dim"(%45) <{broadcast_dimensions = array<i64: 0, 1, 2>}> : (tensor<1x1x192xf32>) -> tensor<1x16x192xf32>
    %47 = "stablehlo.add"(%44, %46) : (tensor<1x16x192xf32>, tensor<1x16x192xf32>) -> tensor<1x16x192xf32>
    %48 = "stablehlo.slice"(%47) <{limit_indices = array<i64: 1, 16, 64>, start_indices = array<i64: 0, 0, 0>, strides = array<i64: 1, 1, 1>}> : (tensor<1x16x192xf32>) -> tensor<1x16x64xf32>
    %49 = "stablehlo.slice"(%47) <{limit_indices = array<i64: 1, 16, 128>, start_indices = array<i64: 0, 0, 64>, strides = array<i64: 1, 1, 1>}> : (tensor<1x16x192xf32>) -> tensor<1x16x64xf32>
    %50 = "stablehlo.slice"(%47) <{limit_indices = array<i64: 1, 16, 192>, start_indices = array<i64: 0, 0, 128>, strides = array<i64: 1, 1, 1>}> : (tensor<1x16x192xf32>) -> tensor<1x16x64xf32>
    %51 = "stablehlo.reshape"(%48) : (tensor<1x16x64xf32>) -> tensor<1x16x4x16xf32>
    %52 = "stablehlo.transpose"(%51) <{permutation = array<i64: 0, 2, 1, 3>}> : (tensor<1x16x4x16xf32>) -> tensor<1x4x16x16xf32>
    %53 = "stablehlo.reshape"(%49) : (tensor<1x16x64xf32>) -> tensor<1x16x4x16xf32>
    %54 = "stablehlo.transpose"(%53) <{permutation = array<i64: 0, 2, 1, 3>}> : (tensor<1x16x4x16xf32>) -> tensor<1x4x16x16xf32>
    %55 = "stablehlo.reshape"(%50) : (tensor<1x16x64xf32>) -> tensor<1x16x4x16xf32>
    %56 = "stablehlo.transpose"(%55) <{permutation = array<i64: 0, 2, 1, 3>}> : (tensor<1x16x4x16xf32>) -> tensor<1x4x16x16xf32>
    %57 = "stablehlo.dot_general"(%52, %54) <{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0, 1], rhs_batching_dimensions = [0, 1], lhs_contracting_dimensions = [3], rhs_contracting_dimensions = [3]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
    %58 = "stablehlo.constant"() <{value = dense<4.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %59 = "stablehlo.broadcast_in_dim"(%58) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<1x4x16x16xf32>
    %60 = "stablehlo.divide"(%57, %59) : (tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
    %61 = "stablehlo.constant"() <{value = dense<true> : tensor<i1>}> : () -> tensor<i1>
    %62 = "stablehlo.broadcast_in_dim"(%61) <{broadcast_dimensions = array<i64>}> : (tensor<i1>) -> tensor<16x16xi1>
    %63 = "func.call"(%62) <{callee = @tril}> : (tensor<16x16xi1>) -> tensor<16x16xi1>
    %64 = "stablehlo.constant"() <{value = dense<-3.40282347E+38> : tensor<f32>}> : () -> tensor<f32>
    %65 = "func.call"(%63, %60, %64) <{callee = @_where}> : (tensor<16x16xi1>, tensor<1x4x16x16xf32>, tensor<f32>) -> tensor<1x4x16x16xf32>
    %66 = "stablehlo.constant"() <{value = dense<0xFF800000> : tensor<f32>}> : () -> tensor<f32>
    %67 = "stablehlo.reduce"(%65, %66) <{dimensions = array<i64: 3>}> ({
    ^bb0(%arg13: tensor<f32>, %arg14: tensor<f32>):
      %89 = "stablehlo.maximum"(%arg13, %arg14) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%89) : (tensor<f32>) -> ()
    }) : (tensor<1x4x16x16xf32>, tensor<f32>) -> tensor<1x4x16xf32>
    %68 = "stablehlo.constant"() <{value = dense<0xFF800000> : tensor<f32>}> : () -> tensor<f32>
    %69 = "stablehlo.broadcast_in_dim"(%68) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<1x4x16xf32>
    %70 = "stablehlo.maximum"(%69, %67) : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
    %71 = "stablehlo.broadcast_in_dim"(%70) <{broadcast_dimensions = array<i64: 0, 1, 2>}> : (tensor<1x4x16xf32>) -> tensor<1x4x16x1xf32>
    %72 = "stablehlo.broadcast_in_dim"(%71) <{broadcast_dimensions = array<i64: 0, 1, 2, 3>}> : (tensor<1x4x16x1xf32>) -> tensor<1x4x16x16xf32>
    %73 = "stablehlo.subtract"(%65, %72) : (tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
    %74 = "stablehlo.exponential"(%73) : (tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
    %75 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %76 = "stablehlo.reduce"(%74, %75) <{dimensions = array<i64: 3>}> ({
    ^bb0(%arg11: tensor<f32>, %arg12: tensor<f32>):
      %88 = "stablehlo.add"(%arg11, %arg12) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%88) : (tensor<f32>) -> ()
    }) : (tensor<1x4x16x16xf32>, tensor<f32>) -> tensor<1x4x16xf32>
    %77 = "stablehlo.broadcast_in_dim"(%76) <{broadcast_dimensions = array<i64: 0, 1, 2>}> : (tensor<1x4x16xf32>) -> tensor<1x4x16x1xf32>
    %78 = "stablehlo.broadcast_in_dim"(%77) <{broadcast_dimensions = array<i64: 0, 1, 2, 3>}> : (tensor<1x4x16x1xf32>) -> tensor<1x4x16x16xf32>
    %79 = "stablehlo.divide"(%74, %78) : (tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
    %80 = "stablehlo.dot_general"(%79, %56) <{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0, 1], rhs_batching_dimensions = [0, 1], lhs_contracting_dimensions = [3], rhs_contracting_dimensions = [2]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
    %81 = "stablehlo.transpose"(%80) <{permutation = array<i64: 0, 2, 1, 3>}> : (tensor<1x4x16x16xf32>) -> tensor<1x16x4x16xf32>
    %82 = "stablehlo.reshape"(%81) : (tensor<1x16x4x16xf32>) -> tensor<1x16x64xf32>
    %83 = "stablehlo.dot_general"(%82, %arg9) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [0]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<1x16x64xf32>, tensor<64x64xf32>) -> tensor<1x16x64xf32>
    %84 = "stablehlo.add"(%arg4, %83) : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
    %85 = "stablehlo.broadcast_in_dim"(%arg5) <{broadcast_dimensions = array<i64: 2>}> : (tensor<64xf32>) -> tensor<1x1x64xf32>
    %86 = "stablehlo.broadcast_in_dim"(%85) <{broadcast_dimensions = array<i64: 0, 1, 2>}> : (tensor<1x1x64xf32>) -> tensor<1x16x64xf32>
    %87 = "stablehlo.add"(%84, %86) : (tensor<1x16x64xf32>, tensor<1x16x64xf32>) -> tensor<1x16x64xf32>
    "func.return"(%87) : (tensor<1x16x64xf32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<16x16xi1>) -> tensor<16x16xi1>, sym_name = "tril", sym_visibility = "private"}> ({
  ^bb0(%arg3: tensor<16x16xi1>):
    %3 = "stablehlo.iota"() <{iota_dimension = 0 : i64}> : () -> tensor<16x16xi32>
    %4 = "stablehlo.constant"() <{value = dense<0> : tensor<i32>}> : () -> tensor<i32>
    %5 = "stablehlo.broadcast_in_dim"(%4) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<16x16xi32>
    %6 = "stablehlo.add"(%3, %5) : (tensor<16x16xi32>, tensor<16x16xi32>) -> tensor<16x16xi32>
    %7 = "stablehlo.iota"() <{iota_dimension = 1 : i64}> : () -> tensor<16x16xi32>
    %8 = "stablehlo.compare"(%6, %7) <{compare_type = #stablehlo<comparison_type SIGNED>, comparison_direction = #stablehlo<comparison_direction GE>}> : (tensor<16x16xi32>, tensor<16x16xi32>) -> tensor<16x16xi1>
    %9 = "stablehlo.constant"() <{value = dense<false> : tensor<i1>}> : () -> tensor<i1>
    %10 = "stablehlo.broadcast_in_dim"(%9) <{broadcast_dimensions = array<i64>}> : (tensor<i1>) -> tensor<16x16xi1>
    %11 = "stablehlo.select"(%8, %arg3, %10) : (tensor<16x16xi1>, tensor<16x16xi1>, tensor<16x16xi1>) -> tensor<16x16xi1>
    "func.return"(%11) : (tensor<16x16xi1>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<16x16xi1>, tensor<1x4x16x16xf32>, tensor<f32>) -> tensor<1x4x16x16xf32>, sym_name = "_where", sym_visibility = "private"}> ({
  ^bb0(%arg0: tensor<16x16xi1>, %arg1: tensor<1x4x16x16xf32>, %arg2: tensor<f32>):
    %0 = "stablehlo.broadcast_in_dim"(%arg0) <{broadcast_dimensions = array<i64: 2, 3>}> : (tensor<16x16xi1>) -> tensor<1x4x16x16xi1>
    %1 = "stablehlo.broadcast_in_dim"(%arg2) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<1x4x16x16xf32>
    %2 = "stablehlo.select"(%0, %arg1, %1) : (tensor<1x4x16x16xi1>, tensor<1x4x16x16xf32>, tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32>
    "func.return"(%2) : (tensor<1x4x16x16xf32>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} : () -> ()
