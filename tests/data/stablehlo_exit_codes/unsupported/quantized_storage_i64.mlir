// expect: storage type i64 of !quant.uniform<i64:f64, 0.5:1> is not supported
func.func @main(%x: tensor<4xf64>) -> tensor<4xf64> {
  %0 = stablehlo.uniform_quantize %x : (tensor<4xf64>) -> tensor<4x!quant.uniform<i64:f64, 0.5:1>>
  %1 = stablehlo.uniform_dequantize %0 : (tensor<4x!quant.uniform<i64:f64, 0.5:1>>) -> tensor<4xf64>
  return %1 : tensor<4xf64>
}
