// expect: 3 unsupported ops: stablehlo.cholesky
func.func @main(%x: tensor<4x4xf32>, %c: tensor<8xcomplex<f32>>) -> (tensor<4x4xf32>, tensor<8xcomplex<f32>>) {
  %0 = stablehlo.cholesky %x, lower = true : tensor<4x4xf32>
  %1 = stablehlo.custom_call @my_solver(%0, %x) {backend_config = ""} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = "stablehlo.all_gather"(%c) {all_gather_dim = 0 : i64, replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<8xcomplex<f32>>) -> tensor<8xcomplex<f32>>
  return %1, %2 : tensor<4x4xf32>, tensor<8xcomplex<f32>>
}
