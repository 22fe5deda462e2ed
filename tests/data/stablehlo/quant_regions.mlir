func.func @main(%arg0: tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, %arg1: tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, %arg2: tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, %arg3: tensor<4x6xi32>, %arg4: tensor<3x1xi32>, %arg5: tensor<3x6x!quant.uniform<i8:f32, 0.125:-3>>) -> (tensor<4x!quant.uniform<i32:f32, 0.0625:0>>, tensor<3x5x!quant.uniform<i8:f32, 0.125:-3>>, tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, tensor<4x6xi32>, tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>) {

  %z = stablehlo.constant dense<-3> : tensor<!quant.uniform<i8:f32, 0.125:-3>>
  %zw = stablehlo.constant dense<0> : tensor<!quant.uniform<i32:f32, 0.0625:0>>
  %lo = stablehlo.constant dense<-128> : tensor<!quant.uniform<i8:f32, 0.125:-3>>
  %0 = "stablehlo.reduce"(%arg0, %zw) ({
  ^bb0(%a: tensor<!quant.uniform<i32:f32, 0.0625:0>>, %b: tensor<!quant.uniform<i32:f32, 0.0625:0>>):
    %r = stablehlo.add %a, %b : (tensor<!quant.uniform<i32:f32, 0.0625:0>>, tensor<!quant.uniform<i32:f32, 0.0625:0>>) -> tensor<!quant.uniform<i32:f32, 0.0625:0>>
    stablehlo.return %r : tensor<!quant.uniform<i32:f32, 0.0625:0>>
  }) {dimensions = array<i64: 1>} : (tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, tensor<!quant.uniform<i32:f32, 0.0625:0>>) -> tensor<4x!quant.uniform<i32:f32, 0.0625:0>>
  %1 = "stablehlo.reduce_window"(%arg0, %lo) <{window_dimensions = array<i64: 2, 2>,
      window_strides = array<i64: 1, 1>}> ({
  ^bb0(%a: tensor<!quant.uniform<i8:f32, 0.125:-3>>, %b: tensor<!quant.uniform<i8:f32, 0.125:-3>>):
    %r = stablehlo.maximum %a, %b : (tensor<!quant.uniform<i8:f32, 0.125:-3>>, tensor<!quant.uniform<i8:f32, 0.125:-3>>) -> tensor<!quant.uniform<i8:f32, 0.125:-3>>
    stablehlo.return %r : tensor<!quant.uniform<i8:f32, 0.125:-3>>
  }) : (tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, tensor<!quant.uniform<i8:f32, 0.125:-3>>) -> tensor<3x5x!quant.uniform<i8:f32, 0.125:-3>>
  %2:2 = "stablehlo.sort"(%arg2, %arg3) <{dimension = 1 : i64, is_stable = true}> ({
  ^bb0(%p: tensor<!quant.uniform<i8:f32, 0.125:-3>>, %q: tensor<!quant.uniform<i8:f32, 0.125:-3>>, %i: tensor<i32>, %j: tensor<i32>):
    %c = stablehlo.compare LT, %p, %q : (tensor<!quant.uniform<i8:f32, 0.125:-3>>, tensor<!quant.uniform<i8:f32, 0.125:-3>>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }) : (tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, tensor<4x6xi32>) -> (tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, tensor<4x6xi32>)
  %3 = "stablehlo.scatter"(%arg0, %arg4, %arg5) <{indices_are_sorted = false,
      scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false}> ({
  ^bb0(%a: tensor<!quant.uniform<i8:f32, 0.125:-3>>, %b: tensor<!quant.uniform<i8:f32, 0.125:-3>>):
    %r = stablehlo.add %a, %b : (tensor<!quant.uniform<i8:f32, 0.125:-3>>, tensor<!quant.uniform<i8:f32, 0.125:-3>>) -> tensor<!quant.uniform<i8:f32, 0.125:-3>>
    stablehlo.return %r : tensor<!quant.uniform<i8:f32, 0.125:-3>>
  }) : (tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, tensor<3x1xi32>, tensor<3x6x!quant.uniform<i8:f32, 0.125:-3>>) -> tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>
  %src = stablehlo.slice %arg1 [0:2, 0:3] : (tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>) -> tensor<2x3x!quant.uniform<i8:f32, 0.125:-3>>
  %4 = "stablehlo.select_and_scatter"(%arg0, %src, %z) <{window_dimensions = array<i64: 2, 2>,
      window_strides = array<i64: 2, 2>}> ({
  ^bb0(%p: tensor<!quant.uniform<i8:f32, 0.125:-3>>, %q: tensor<!quant.uniform<i8:f32, 0.125:-3>>):
    %c = stablehlo.compare GE, %p, %q : (tensor<!quant.uniform<i8:f32, 0.125:-3>>, tensor<!quant.uniform<i8:f32, 0.125:-3>>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%a: tensor<!quant.uniform<i8:f32, 0.125:-3>>, %b: tensor<!quant.uniform<i8:f32, 0.125:-3>>):
    %r = stablehlo.add %a, %b : (tensor<!quant.uniform<i8:f32, 0.125:-3>>, tensor<!quant.uniform<i8:f32, 0.125:-3>>) -> tensor<!quant.uniform<i8:f32, 0.125:-3>>
    stablehlo.return %r : tensor<!quant.uniform<i8:f32, 0.125:-3>>
  }) : (tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, tensor<2x3x!quant.uniform<i8:f32, 0.125:-3>>, tensor<!quant.uniform<i8:f32, 0.125:-3>>) -> tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>
  %5 = "stablehlo.map"(%arg0, %arg1) <{dimensions = array<i64: 0, 1>}> ({
  ^bb0(%p: tensor<!quant.uniform<i8:f32, 0.125:-3>>, %q: tensor<!quant.uniform<i8:f32, 0.125:-3>>):
    %m = stablehlo.multiply %p, %q : (tensor<!quant.uniform<i8:f32, 0.125:-3>>, tensor<!quant.uniform<i8:f32, 0.125:-3>>) -> tensor<!quant.uniform<i8:f32, 0.125:-3>>
    %n = stablehlo.add %m, %p : (tensor<!quant.uniform<i8:f32, 0.125:-3>>, tensor<!quant.uniform<i8:f32, 0.125:-3>>) -> tensor<!quant.uniform<i8:f32, 0.125:-3>>
    stablehlo.return %n : tensor<!quant.uniform<i8:f32, 0.125:-3>>
  }) : (tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>) -> tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c3 = stablehlo.constant dense<3> : tensor<i32>
  %6:2 = stablehlo.while(%k = %c0, %acc = %arg0) : tensor<i32>, tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>
   cond {
    %lt = stablehlo.compare LT, %k, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  } do {
    %n = stablehlo.add %acc, %arg1 : (tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>) -> tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>
    %k1 = stablehlo.add %k, %c1 : tensor<i32>
    stablehlo.return %k1, %n : tensor<i32>, tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>
  }
  return %0, %1, %2#0, %2#1, %3, %4, %5, %6#1 : tensor<4x!quant.uniform<i32:f32, 0.0625:0>>, tensor<3x5x!quant.uniform<i8:f32, 0.125:-3>>, tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, tensor<4x6xi32>, tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>, tensor<4x6x!quant.uniform<i8:f32, 0.125:-3>>
}
