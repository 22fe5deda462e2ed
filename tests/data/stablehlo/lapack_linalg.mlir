module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4x4xf32>, %arg1: tensor<5x3xf32>, %arg2: tensor<4x2xf32>) -> (tensor<4x4xf32> {jax.result_info = "result[0]"}, tensor<4x2xf32> {jax.result_info = "result[1]"}, tensor<5x3xf32> {jax.result_info = "result[2]"}, tensor<3x3xf32> {jax.result_info = "result[3]"}, tensor<5x5xf32> {jax.result_info = "result[4]"}, tensor<5x3xf32> {jax.result_info = "result[5]"}, tensor<4x4xf64> {jax.result_info = "result[6]"}) {
    %0 = call @cholesky(%arg0) : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %1 = stablehlo.custom_call @lapack_strsm_ffi(%arg0, %arg2) {backend_config = "", mhlo.backend_config = {diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}, mhlo.frontend_attributes = {num_batch_dims = "0"}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 1, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [k, l])->([m, n]) {i=4, j=4, k=4, l=2, m=4, n=2}, custom>} : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    %2:2 = call @qr(%arg1) : (tensor<5x3xf32>) -> (tensor<5x3xf32>, tensor<3x3xf32>)
    %3:2 = call @qr_0(%arg1) : (tensor<5x3xf32>) -> (tensor<5x5xf32>, tensor<5x3xf32>)
    %4 = stablehlo.convert %arg0 : (tensor<4x4xf32>) -> tensor<4x4xf64>
    %5:2 = stablehlo.custom_call @lapack_dpotrf_ffi(%4) {backend_config = "", mhlo.backend_config = {uplo = 76 : ui8}, mhlo.frontend_attributes = {num_batch_dims = "0"}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([k, l], []) {i=4, j=4, k=4, l=4}, custom>} : (tensor<4x4xf64>) -> (tensor<4x4xf64>, tensor<i32>)
    %c = stablehlo.constant dense<0> : tensor<i32>
    %6 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<i32>
    %7 = stablehlo.compare EQ, %5#1, %6, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %8 = stablehlo.broadcast_in_dim %7, dims = [] : (tensor<i1>) -> tensor<1x1xi1>
    %cst = stablehlo.constant dense<0x7FF8000000000000> : tensor<f64>
    %9 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f64>) -> tensor<4x4xf64>
    %10 = stablehlo.broadcast_in_dim %8, dims = [0, 1] : (tensor<1x1xi1>) -> tensor<4x4xi1>
    %11 = stablehlo.select %10, %5#0, %9 : tensor<4x4xi1>, tensor<4x4xf64>
    %12 = stablehlo.iota dim = 0 : tensor<4x4xi64>
    %c_0 = stablehlo.constant dense<0> : tensor<i64>
    %13 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i64>) -> tensor<4x4xi64>
    %14 = stablehlo.add %12, %13 : tensor<4x4xi64>
    %15 = stablehlo.iota dim = 1 : tensor<4x4xi64>
    %16 = stablehlo.compare GE, %14, %15, SIGNED : (tensor<4x4xi64>, tensor<4x4xi64>) -> tensor<4x4xi1>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f64>
    %17 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f64>) -> tensor<4x4xf64>
    %18 = stablehlo.select %16, %11, %17 : tensor<4x4xi1>, tensor<4x4xf64>
    return %0, %1, %2#0, %2#1, %3#0, %3#1, %18 : tensor<4x4xf32>, tensor<4x2xf32>, tensor<5x3xf32>, tensor<3x3xf32>, tensor<5x5xf32>, tensor<5x3xf32>, tensor<4x4xf64>
  }
  func.func private @cholesky(%arg0: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %1 = stablehlo.add %arg0, %0 : tensor<4x4xf32>
    %cst = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %3 = stablehlo.divide %1, %2 : tensor<4x4xf32>
    %4:2 = stablehlo.custom_call @lapack_spotrf_ffi(%3) {backend_config = "", mhlo.backend_config = {uplo = 76 : ui8}, mhlo.frontend_attributes = {num_batch_dims = "0"}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([k, l], []) {i=4, j=4, k=4, l=4}, custom>} : (tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<i32>)
    %c = stablehlo.constant dense<0> : tensor<i32>
    %5 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<i32>
    %6 = stablehlo.compare EQ, %4#1, %5, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %7 = stablehlo.broadcast_in_dim %6, dims = [] : (tensor<i1>) -> tensor<1x1xi1>
    %cst_0 = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %8 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %9 = stablehlo.broadcast_in_dim %7, dims = [0, 1] : (tensor<1x1xi1>) -> tensor<4x4xi1>
    %10 = stablehlo.select %9, %4#0, %8 : tensor<4x4xi1>, tensor<4x4xf32>
    %11 = stablehlo.iota dim = 0 : tensor<4x4xi64>
    %c_1 = stablehlo.constant dense<0> : tensor<i64>
    %12 = stablehlo.broadcast_in_dim %c_1, dims = [] : (tensor<i64>) -> tensor<4x4xi64>
    %13 = stablehlo.add %11, %12 : tensor<4x4xi64>
    %14 = stablehlo.iota dim = 1 : tensor<4x4xi64>
    %15 = stablehlo.compare GE, %13, %14, SIGNED : (tensor<4x4xi64>, tensor<4x4xi64>) -> tensor<4x4xi1>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %16 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<4x4xf32>
    %17 = stablehlo.select %15, %10, %16 : tensor<4x4xi1>, tensor<4x4xf32>
    return %17 : tensor<4x4xf32>
  }
  func.func private @qr(%arg0: tensor<5x3xf32>) -> (tensor<5x3xf32>, tensor<3x3xf32>) {
    %0:2 = stablehlo.custom_call @lapack_sgeqrf_ffi(%arg0) {backend_config = "", mhlo.backend_config = {}, mhlo.frontend_attributes = {num_batch_dims = "0"}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([k, l], [m]) {i=5, j=3, k=5, l=3, m=3}, custom>} : (tensor<5x3xf32>) -> (tensor<5x3xf32>, tensor<3xf32>)
    %1 = stablehlo.custom_call @lapack_sorgqr_ffi(%0#0, %0#1) {backend_config = "", mhlo.backend_config = {}, mhlo.frontend_attributes = {num_batch_dims = "0"}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [k])->([l, m]) {i=5, j=3, k=3, l=5, m=3}, custom>} : (tensor<5x3xf32>, tensor<3xf32>) -> tensor<5x3xf32>
    %2 = stablehlo.slice %0#0 [0:3, 0:3] : (tensor<5x3xf32>) -> tensor<3x3xf32>
    %3 = stablehlo.iota dim = 0 : tensor<3x3xi64>
    %c = stablehlo.constant dense<-1> : tensor<i64>
    %4 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i64>) -> tensor<3x3xi64>
    %5 = stablehlo.add %3, %4 : tensor<3x3xi64>
    %6 = stablehlo.iota dim = 1 : tensor<3x3xi64>
    %7 = stablehlo.compare GE, %5, %6, SIGNED : (tensor<3x3xi64>, tensor<3x3xi64>) -> tensor<3x3xi1>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %8 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3x3xf32>
    %9 = stablehlo.select %7, %8, %2 : tensor<3x3xi1>, tensor<3x3xf32>
    return %1, %9 : tensor<5x3xf32>, tensor<3x3xf32>
  }
  func.func private @qr_0(%arg0: tensor<5x3xf32>) -> (tensor<5x5xf32>, tensor<5x3xf32>) {
    %0:2 = stablehlo.custom_call @lapack_sgeqrf_ffi(%arg0) {backend_config = "", mhlo.backend_config = {}, mhlo.frontend_attributes = {num_batch_dims = "0"}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j])->([k, l], [m]) {i=5, j=3, k=5, l=3, m=3}, custom>} : (tensor<5x3xf32>) -> (tensor<5x3xf32>, tensor<3xf32>)
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.pad %0#0, %cst, low = [0, 0], high = [0, 2], interior = [0, 0] : (tensor<5x3xf32>, tensor<f32>) -> tensor<5x5xf32>
    %2 = stablehlo.custom_call @lapack_sorgqr_ffi(%1, %0#1) {backend_config = "", mhlo.backend_config = {}, mhlo.frontend_attributes = {num_batch_dims = "0"}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<0> : tensor<1xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>], sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [k])->([l, m]) {i=5, j=5, k=3, l=5, m=5}, custom>} : (tensor<5x5xf32>, tensor<3xf32>) -> tensor<5x5xf32>
    %3 = stablehlo.iota dim = 0 : tensor<5x3xi64>
    %c = stablehlo.constant dense<-1> : tensor<i64>
    %4 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i64>) -> tensor<5x3xi64>
    %5 = stablehlo.add %3, %4 : tensor<5x3xi64>
    %6 = stablehlo.iota dim = 1 : tensor<5x3xi64>
    %7 = stablehlo.compare GE, %5, %6, SIGNED : (tensor<5x3xi64>, tensor<5x3xi64>) -> tensor<5x3xi1>
    %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %8 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<5x3xf32>
    %9 = stablehlo.select %7, %8, %0#0 : tensor<5x3xi1>, tensor<5x3xf32>
    return %2, %9 : tensor<5x5xf32>, tensor<5x3xf32>
  }
}
