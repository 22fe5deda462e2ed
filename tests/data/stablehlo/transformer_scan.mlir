module @jit__transformer attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8xi32>, %arg1: tensor<40x16xf32>, %arg2: tensor<2x16xf32>, %arg3: tensor<2x16x64xf32>, %arg4: tensor<2x64x16xf32>, %arg5: tensor<2x16x16xf32>, %arg6: tensor<2x16x48xf32>) -> (tensor<8x40xf32> {jax.result_info = "result[0]"}, tensor<8xi64> {jax.result_info = "result[1]"}, tensor<2xf32> {jax.result_info = "result[2]"}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %1 = stablehlo.compare LT, %arg0, %0, SIGNED : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
    %c_0 = stablehlo.constant dense<40> : tensor<i32>
    %2 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<8xi32>
    %3 = stablehlo.add %arg0, %2 : tensor<8xi32>
    %4 = stablehlo.select %1, %3, %arg0 : tensor<8xi1>, tensor<8xi32>
    %5 = stablehlo.broadcast_in_dim %4, dims = [0] : (tensor<8xi32>) -> tensor<8x1xi32>
    %6 = "stablehlo.gather"(%arg1, %5) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 16>}> : (tensor<40x16xf32>, tensor<8x1xi32>) -> tensor<8x16xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %c_1 = stablehlo.constant dense<0> : tensor<i64>
    %8:8 = stablehlo.while(%iterArg = %arg6, %iterArg_2 = %arg5, %iterArg_3 = %arg3, %iterArg_4 = %arg4, %iterArg_5 = %arg2, %iterArg_6 = %c_1, %iterArg_7 = %6, %iterArg_8 = %7) : tensor<2x16x48xf32>, tensor<2x16x16xf32>, tensor<2x16x64xf32>, tensor<2x64x16xf32>, tensor<2x16xf32>, tensor<i64>, tensor<8x16xf32>, tensor<2xf32>
    cond {
      %c_9 = stablehlo.constant dense<2> : tensor<i64>
      %13 = stablehlo.compare LT, %iterArg_6, %c_9, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %13 : tensor<i1>
    } do {
      %13 = func.call @dynamic_index_in_dim(%iterArg, %iterArg_6) : (tensor<2x16x48xf32>, tensor<i64>) -> tensor<16x48xf32>
      %14 = func.call @dynamic_index_in_dim_0(%iterArg_2, %iterArg_6) : (tensor<2x16x16xf32>, tensor<i64>) -> tensor<16x16xf32>
      %15 = func.call @dynamic_index_in_dim_1(%iterArg_3, %iterArg_6) : (tensor<2x16x64xf32>, tensor<i64>) -> tensor<16x64xf32>
      %16 = func.call @dynamic_index_in_dim_2(%iterArg_4, %iterArg_6) : (tensor<2x64x16xf32>, tensor<i64>) -> tensor<64x16xf32>
      %17 = func.call @dynamic_index_in_dim_3(%iterArg_5, %iterArg_6) : (tensor<2x16xf32>, tensor<i64>) -> tensor<16xf32>
      %18:2 = func.call @closed_call(%iterArg_7, %13, %14, %15, %16, %17) : (tensor<8x16xf32>, tensor<16x48xf32>, tensor<16x16xf32>, tensor<16x64xf32>, tensor<64x16xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<f32>)
      %19 = func.call @dynamic_update_index_in_dim(%iterArg_8, %18#1, %iterArg_6) : (tensor<2xf32>, tensor<f32>, tensor<i64>) -> tensor<2xf32>
      %c_9 = stablehlo.constant dense<1> : tensor<i64>
      %20 = stablehlo.add %iterArg_6, %c_9 : tensor<i64>
      stablehlo.return %iterArg, %iterArg_2, %iterArg_3, %iterArg_4, %iterArg_5, %20, %18#0, %19 : tensor<2x16x48xf32>, tensor<2x16x16xf32>, tensor<2x16x64xf32>, tensor<2x64x16xf32>, tensor<2x16xf32>, tensor<i64>, tensor<8x16xf32>, tensor<2xf32>
    }
    %9 = stablehlo.transpose %arg1, dims = [1, 0] : (tensor<40x16xf32>) -> tensor<16x40xf32>
    %10 = stablehlo.dot_general %8#6, %9, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<16x40xf32>) -> tensor<8x40xf32>
    %11 = call @log_softmax(%10) : (tensor<8x40xf32>) -> tensor<8x40xf32>
    %12 = call @argmax(%10) : (tensor<8x40xf32>) -> tensor<8xi64>
    return %11, %12, %8#7 : tensor<8x40xf32>, tensor<8xi64>, tensor<2xf32>
  }
  func.func private @dynamic_index_in_dim(%arg0: tensor<2x16x48xf32>, %arg1: tensor<i64>) -> tensor<16x48xf32> {
    %c = stablehlo.constant dense<0> : tensor<i64>
    %c_0 = stablehlo.constant dense<0> : tensor<i64>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 16, 48] : (tensor<2x16x48xf32>, tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<1x16x48xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x16x48xf32>) -> tensor<16x48xf32>
    return %1 : tensor<16x48xf32>
  }
  func.func private @dynamic_index_in_dim_0(%arg0: tensor<2x16x16xf32>, %arg1: tensor<i64>) -> tensor<16x16xf32> {
    %c = stablehlo.constant dense<0> : tensor<i64>
    %c_0 = stablehlo.constant dense<0> : tensor<i64>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 16, 16] : (tensor<2x16x16xf32>, tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<1x16x16xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x16x16xf32>) -> tensor<16x16xf32>
    return %1 : tensor<16x16xf32>
  }
  func.func private @dynamic_index_in_dim_1(%arg0: tensor<2x16x64xf32>, %arg1: tensor<i64>) -> tensor<16x64xf32> {
    %c = stablehlo.constant dense<0> : tensor<i64>
    %c_0 = stablehlo.constant dense<0> : tensor<i64>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 16, 64] : (tensor<2x16x64xf32>, tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<1x16x64xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x16x64xf32>) -> tensor<16x64xf32>
    return %1 : tensor<16x64xf32>
  }
  func.func private @dynamic_index_in_dim_2(%arg0: tensor<2x64x16xf32>, %arg1: tensor<i64>) -> tensor<64x16xf32> {
    %c = stablehlo.constant dense<0> : tensor<i64>
    %c_0 = stablehlo.constant dense<0> : tensor<i64>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, %c_0, sizes = [1, 64, 16] : (tensor<2x64x16xf32>, tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<1x64x16xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x64x16xf32>) -> tensor<64x16xf32>
    return %1 : tensor<64x16xf32>
  }
  func.func private @dynamic_index_in_dim_3(%arg0: tensor<2x16xf32>, %arg1: tensor<i64>) -> tensor<16xf32> {
    %c = stablehlo.constant dense<0> : tensor<i64>
    %0 = stablehlo.dynamic_slice %arg0, %arg1, %c, sizes = [1, 16] : (tensor<2x16xf32>, tensor<i64>, tensor<i64>) -> tensor<1x16xf32>
    %1 = stablehlo.reshape %0 : (tensor<1x16xf32>) -> tensor<16xf32>
    return %1 : tensor<16xf32>
  }
  func.func private @closed_call(%arg0: tensor<8x16xf32>, %arg1: tensor<16x48xf32>, %arg2: tensor<16x16xf32>, %arg3: tensor<16x64xf32>, %arg4: tensor<64x16xf32>, %arg5: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<f32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [0] : (tensor<8xf32>) -> tensor<8x1xf32>
    %cst_0 = stablehlo.constant dense<1.600000e+01> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
    %3 = stablehlo.divide %1, %2 : tensor<8x1xf32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x16xf32>
    %5 = stablehlo.subtract %arg0, %4 : tensor<8x16xf32>
    %c = stablehlo.constant dense<0> : tensor<i64>
    %6 = call @_var(%arg0, %c) : (tensor<8x16xf32>, tensor<i64>) -> tensor<8x1xf32>
    %cst_1 = stablehlo.constant dense<9.99999974E-6> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
    %8 = stablehlo.add %6, %7 : tensor<8x1xf32>
    %9 = stablehlo.rsqrt %8 : tensor<8x1xf32>
    %10 = stablehlo.broadcast_in_dim %9, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x16xf32>
    %11 = stablehlo.multiply %5, %10 : tensor<8x16xf32>
    %12 = stablehlo.broadcast_in_dim %arg5, dims = [1] : (tensor<16xf32>) -> tensor<1x16xf32>
    %13 = stablehlo.broadcast_in_dim %12, dims = [0, 1] : (tensor<1x16xf32>) -> tensor<8x16xf32>
    %14 = stablehlo.multiply %11, %13 : tensor<8x16xf32>
    %15 = stablehlo.dot_general %14, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<16x48xf32>) -> tensor<8x48xf32>
    %16 = stablehlo.slice %15 [0:8, 0:16] : (tensor<8x48xf32>) -> tensor<8x16xf32>
    %17 = stablehlo.slice %15 [0:8, 16:32] : (tensor<8x48xf32>) -> tensor<8x16xf32>
    %18 = stablehlo.slice %15 [0:8, 32:48] : (tensor<8x48xf32>) -> tensor<8x16xf32>
    %19 = stablehlo.reshape %16 : (tensor<8x16xf32>) -> tensor<8x2x8xf32>
    %20 = stablehlo.transpose %19, dims = [1, 0, 2] : (tensor<8x2x8xf32>) -> tensor<2x8x8xf32>
    %21 = stablehlo.reshape %17 : (tensor<8x16xf32>) -> tensor<8x2x8xf32>
    %22 = stablehlo.transpose %21, dims = [1, 0, 2] : (tensor<8x2x8xf32>) -> tensor<2x8x8xf32>
    %23 = stablehlo.reshape %18 : (tensor<8x16xf32>) -> tensor<8x2x8xf32>
    %24 = stablehlo.transpose %23, dims = [1, 0, 2] : (tensor<8x2x8xf32>) -> tensor<2x8x8xf32>
    %25 = stablehlo.dot_general %20, %22, batching_dims = [0] x [0], contracting_dims = [2] x [2], precision = [DEFAULT, DEFAULT] : (tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
    %cst_2 = stablehlo.constant dense<0.353553385> : tensor<f32>
    %26 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<2x8x8xf32>
    %27 = stablehlo.multiply %25, %26 : tensor<2x8x8xf32>
    %c_3 = stablehlo.constant dense<true> : tensor<i1>
    %28 = stablehlo.broadcast_in_dim %c_3, dims = [] : (tensor<i1>) -> tensor<8x8xi1>
    %29 = call @tril(%28) : (tensor<8x8xi1>) -> tensor<8x8xi1>
    %cst_4 = stablehlo.constant dense<-1.000000e+09> : tensor<f64>
    %30 = call @_where_4(%29, %27, %cst_4) : (tensor<8x8xi1>, tensor<2x8x8xf32>, tensor<f64>) -> tensor<2x8x8xf32>
    %cst_5 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %31 = stablehlo.reduce(%30 init: %cst_5) applies stablehlo.maximum across dimensions = [2] : (tensor<2x8x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %cst_6 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %32 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<2x8xf32>
    %33 = stablehlo.maximum %32, %31 : tensor<2x8xf32>
    %34 = stablehlo.broadcast_in_dim %33, dims = [0, 1] : (tensor<2x8xf32>) -> tensor<2x8x1xf32>
    %35 = stablehlo.broadcast_in_dim %34, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
    %36 = stablehlo.subtract %30, %35 : tensor<2x8x8xf32>
    %37 = stablehlo.exponential %36 : tensor<2x8x8xf32>
    %cst_7 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %38 = stablehlo.reduce(%37 init: %cst_7) applies stablehlo.add across dimensions = [2] : (tensor<2x8x8xf32>, tensor<f32>) -> tensor<2x8xf32>
    %39 = stablehlo.broadcast_in_dim %38, dims = [0, 1] : (tensor<2x8xf32>) -> tensor<2x8x1xf32>
    %40 = stablehlo.broadcast_in_dim %39, dims = [0, 1, 2] : (tensor<2x8x1xf32>) -> tensor<2x8x8xf32>
    %41 = stablehlo.divide %37, %40 : tensor<2x8x8xf32>
    %42 = stablehlo.dot_general %41, %24, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
    %43 = stablehlo.transpose %42, dims = [1, 0, 2] : (tensor<2x8x8xf32>) -> tensor<8x2x8xf32>
    %44 = stablehlo.reshape %43 : (tensor<8x2x8xf32>) -> tensor<8x16xf32>
    %45 = stablehlo.dot_general %44, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %46 = stablehlo.add %arg0, %45 : tensor<8x16xf32>
    %cst_8 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %47 = stablehlo.reduce(%46 init: %cst_8) applies stablehlo.add across dimensions = [1] : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
    %48 = stablehlo.broadcast_in_dim %47, dims = [0] : (tensor<8xf32>) -> tensor<8x1xf32>
    %cst_9 = stablehlo.constant dense<1.600000e+01> : tensor<f32>
    %49 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
    %50 = stablehlo.divide %48, %49 : tensor<8x1xf32>
    %51 = stablehlo.broadcast_in_dim %50, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x16xf32>
    %52 = stablehlo.subtract %46, %51 : tensor<8x16xf32>
    %c_10 = stablehlo.constant dense<0> : tensor<i64>
    %53 = call @_var(%46, %c_10) : (tensor<8x16xf32>, tensor<i64>) -> tensor<8x1xf32>
    %cst_11 = stablehlo.constant dense<9.99999974E-6> : tensor<f32>
    %54 = stablehlo.broadcast_in_dim %cst_11, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
    %55 = stablehlo.add %53, %54 : tensor<8x1xf32>
    %56 = stablehlo.rsqrt %55 : tensor<8x1xf32>
    %57 = stablehlo.broadcast_in_dim %56, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x16xf32>
    %58 = stablehlo.multiply %52, %57 : tensor<8x16xf32>
    %59 = stablehlo.broadcast_in_dim %arg5, dims = [1] : (tensor<16xf32>) -> tensor<1x16xf32>
    %60 = stablehlo.broadcast_in_dim %59, dims = [0, 1] : (tensor<1x16xf32>) -> tensor<8x16xf32>
    %61 = stablehlo.multiply %58, %60 : tensor<8x16xf32>
    %62 = stablehlo.dot_general %61, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
    %cst_12 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %63 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<8x64xf32>
    %64 = stablehlo.multiply %63, %62 : tensor<8x64xf32>
    %65 = stablehlo.negate %62 : tensor<8x64xf32>
    %cst_13 = stablehlo.constant dense<0.707106769> : tensor<f32>
    %66 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<f32>) -> tensor<8x64xf32>
    %67 = stablehlo.multiply %65, %66 : tensor<8x64xf32>
    %68 = chlo.erfc %67 : tensor<8x64xf32> -> tensor<8x64xf32>
    %69 = stablehlo.multiply %64, %68 : tensor<8x64xf32>
    %70 = stablehlo.dot_general %69, %arg4, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
    %71 = stablehlo.add %46, %70 : tensor<8x16xf32>
    %cst_14 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %72 = stablehlo.reduce(%46 init: %cst_14) applies stablehlo.add across dimensions = [0, 1] : (tensor<8x16xf32>, tensor<f32>) -> tensor<f32>
    return %71, %72 : tensor<8x16xf32>, tensor<f32>
  }
  func.func private @_var(%arg0: tensor<8x16xf32>, %arg1: tensor<i64>) -> tensor<8x1xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [0] : (tensor<8xf32>) -> tensor<8x1xf32>
    %cst_0 = stablehlo.constant dense<1.600000e+01> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
    %3 = stablehlo.divide %1, %2 : tensor<8x1xf32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x16xf32>
    %5 = stablehlo.subtract %arg0, %4 : tensor<8x16xf32>
    %6 = chlo.square %5 : tensor<8x16xf32> -> tensor<8x16xf32>
    %7 = stablehlo.convert %arg1 : (tensor<i64>) -> tensor<f32>
    %cst_1 = stablehlo.constant dense<1.600000e+01> : tensor<f32>
    %8 = stablehlo.subtract %cst_1, %7 : tensor<f32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %9 = stablehlo.reduce(%6 init: %cst_2) applies stablehlo.add across dimensions = [1] : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
    %10 = stablehlo.broadcast_in_dim %9, dims = [0] : (tensor<8xf32>) -> tensor<8x1xf32>
    %11 = stablehlo.broadcast_in_dim %8, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
    %12 = stablehlo.divide %10, %11 : tensor<8x1xf32>
    %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %13 = stablehlo.compare GT, %8, %cst_3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %cst_4 = stablehlo.constant dense<0x7FF8000000000000> : tensor<f64>
    %14 = call @_where(%13, %12, %cst_4) : (tensor<i1>, tensor<8x1xf32>, tensor<f64>) -> tensor<8x1xf32>
    return %14 : tensor<8x1xf32>
  }
  func.func private @_where(%arg0: tensor<i1>, %arg1: tensor<8x1xf32>, %arg2: tensor<f64>) -> tensor<8x1xf32> {
    %0 = stablehlo.convert %arg2 : (tensor<f64>) -> tensor<f32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<8x1xf32>
    %2 = stablehlo.select %arg0, %arg1, %1 : tensor<i1>, tensor<8x1xf32>
    return %2 : tensor<8x1xf32>
  }
  func.func private @tril(%arg0: tensor<8x8xi1>) -> tensor<8x8xi1> {
    %0 = stablehlo.iota dim = 0 : tensor<8x8xi64>
    %c = stablehlo.constant dense<0> : tensor<i64>
    %1 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i64>) -> tensor<8x8xi64>
    %2 = stablehlo.add %0, %1 : tensor<8x8xi64>
    %3 = stablehlo.iota dim = 1 : tensor<8x8xi64>
    %4 = stablehlo.compare GE, %2, %3, SIGNED : (tensor<8x8xi64>, tensor<8x8xi64>) -> tensor<8x8xi1>
    %c_0 = stablehlo.constant dense<false> : tensor<i1>
    %5 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i1>) -> tensor<8x8xi1>
    %6 = stablehlo.select %4, %arg0, %5 : tensor<8x8xi1>, tensor<8x8xi1>
    return %6 : tensor<8x8xi1>
  }
  func.func private @_where_4(%arg0: tensor<8x8xi1>, %arg1: tensor<2x8x8xf32>, %arg2: tensor<f64>) -> tensor<2x8x8xf32> {
    %0 = stablehlo.convert %arg2 : (tensor<f64>) -> tensor<f32>
    %1 = stablehlo.broadcast_in_dim %arg0, dims = [1, 2] : (tensor<8x8xi1>) -> tensor<2x8x8xi1>
    %2 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<2x8x8xf32>
    %3 = stablehlo.select %1, %arg1, %2 : tensor<2x8x8xi1>, tensor<2x8x8xf32>
    return %3 : tensor<2x8x8xf32>
  }
  func.func private @dynamic_update_index_in_dim(%arg0: tensor<2xf32>, %arg1: tensor<f32>, %arg2: tensor<i64>) -> tensor<2xf32> {
    %0 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<1xf32>
    %1 = stablehlo.dynamic_update_slice %arg0, %0, %arg2 : (tensor<2xf32>, tensor<1xf32>, tensor<i64>) -> tensor<2xf32>
    return %1 : tensor<2xf32>
  }
  func.func private @log_softmax(%arg0: tensor<8x40xf32>) -> tensor<8x40xf32> {
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = [1] : (tensor<8x40xf32>, tensor<f32>) -> tensor<8xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<8xf32>
    %2 = stablehlo.maximum %1, %0 : tensor<8xf32>
    %3 = stablehlo.broadcast_in_dim %2, dims = [0] : (tensor<8xf32>) -> tensor<8x1xf32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x40xf32>
    %5 = stablehlo.subtract %arg0, %4 : tensor<8x40xf32>
    %6 = stablehlo.exponential %5 : tensor<8x40xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %7 = stablehlo.reduce(%6 init: %cst_1) applies stablehlo.add across dimensions = [1] : (tensor<8x40xf32>, tensor<f32>) -> tensor<8xf32>
    %8 = stablehlo.broadcast_in_dim %7, dims = [0] : (tensor<8xf32>) -> tensor<8x1xf32>
    %9 = stablehlo.log %8 : tensor<8x1xf32>
    %10 = stablehlo.broadcast_in_dim %9, dims = [0, 1] : (tensor<8x1xf32>) -> tensor<8x40xf32>
    %11 = stablehlo.subtract %5, %10 : tensor<8x40xf32>
    return %11 : tensor<8x40xf32>
  }
  func.func private @argmax(%arg0: tensor<8x40xf32>) -> tensor<8xi64> {
    %0 = stablehlo.iota dim = 1 : tensor<8x40xi64>
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %c = stablehlo.constant dense<0> : tensor<i64>
    %1:2 = stablehlo.reduce(%arg0 init: %cst), (%0 init: %c) across dimensions = [1] : (tensor<8x40xf32>, tensor<8x40xi64>, tensor<f32>, tensor<i64>) -> (tensor<8xf32>, tensor<8xi64>)
     reducer(%arg1: tensor<f32>, %arg3: tensor<f32>) (%arg2: tensor<i64>, %arg4: tensor<i64>)  {
      %2 = stablehlo.compare GT, %arg1, %arg3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %3 = stablehlo.compare NE, %arg1, %arg1, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %4 = stablehlo.or %2, %3 : tensor<i1>
      %5 = stablehlo.compare EQ, %arg1, %arg3, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %6 = stablehlo.compare LT, %arg2, %arg4, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
      %7 = stablehlo.and %5, %6 : tensor<i1>
      %8 = stablehlo.or %4, %7 : tensor<i1>
      %9 = stablehlo.select %4, %arg1, %arg3 : tensor<i1>, tensor<f32>
      %10 = stablehlo.select %8, %arg2, %arg4 : tensor<i1>, tensor<i64>
      stablehlo.return %9, %10 : tensor<f32>, tensor<i64>
    }
    return %1#1 : tensor<8xi64>
  }
}
