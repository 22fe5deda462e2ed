// expect: stablehlo.while: the loop condition is not known at compile time
func.func @main(%a: tensor<complex<f64>>) -> tensor<complex<f64>> {
  %0 = stablehlo.while(%z = %a) : tensor<complex<f64>>
   cond {
    %e = stablehlo.compare EQ, %z, %z, FLOAT : (tensor<complex<f64>>, tensor<complex<f64>>) -> tensor<i1>
    stablehlo.return %e : tensor<i1>
  } do {
    stablehlo.return %z : tensor<complex<f64>>
  }
  return %0 : tensor<complex<f64>>
}
