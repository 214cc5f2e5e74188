// Views and conversions of MMA register fragments, shared by kernel families: mma.sync's m16n8
// atoms (sm80) and wgmma's m64nN atoms (sm90) spread a row over the 4 lanes of a quad alike.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_conversion.h>

namespace flashcore::cuda {

// A thread's fp32 accumulator values as (rows, cols), so row-wise softmax code can index
// [row][col] whatever produced them:
//   mma.sync m16n8: per thread (col, col+1) x (row, row+8), layout ((2 cols, 2 rows), MMA_M,
//     MMA_N), viewed as ((2, MMA_M), (2, MMA_N));
//   wgmma m64nN: the same pairs repeated every 8 columns, ((2 cols, 2 rows, N/8), MMA_M, MMA_N),
//     viewed as ((2, MMA_M), (2, N/8, MMA_N)).
template <class Layout>
__forceinline__ __device__ auto accumulator_as_rows_cols(Layout acc_layout) {
  using namespace cute;
  constexpr int kAtomRank = decltype(rank<0>(acc_layout))::value;
  static_assert(kAtomRank == 2 || kAtomRank == 3);
  if constexpr (kAtomRank == 2) {
    return make_layout(make_layout(get<0, 1>(acc_layout), get<1>(acc_layout)),
                       make_layout(get<0, 0>(acc_layout), get<2>(acc_layout)));
  } else {
    return make_layout(make_layout(get<0, 1>(acc_layout), get<1>(acc_layout)),
                       make_layout(get<0, 0>(acc_layout), get<0, 2>(acc_layout), get<2>(acc_layout)));
  }
}

// An accumulator tile of S (M x N, C layout) reused as the A operand of the next product (M x K
// with K = N): two neighbouring n8 atoms make one k16 atom, ((2,2), MMA_M, MMA_N) becomes
// ((2,2,2), MMA_M, MMA_N/2). This is what keeps P in registers between the two GEMMs.
template <class Layout>
__forceinline__ __device__ auto accumulator_as_a_operand(Layout acc_layout) {
  using namespace cute;
  auto split = logical_divide(acc_layout, Shape<Underscore, Underscore, _2>{});  // ((2,2), M, (2, N/2))
  return make_layout(make_layout(get<0>(split), get<2, 0>(split)), get<1>(split), get<2, 1>(split));
}

// Element-wise conversion of a register tensor (e.g. fp32 accumulators to fp16) into a new
// register tensor of the same layout; pairs go through one packed cvt (cvt.rn.f16x2.f32).
template <typename To, class Engine, class Layout>
__forceinline__ __device__ auto convert_fragment(cute::Tensor<Engine, Layout> const& from) {
  using From = typename Engine::value_type;
  constexpr int kN = decltype(cute::size(from))::value;
  static_assert(kN % 2 == 0);
  auto to = cute::make_tensor<To>(from.layout());
  cutlass::NumericArrayConverter<To, From, 2> converter;
  CUTE_UNROLL
  for (int i = 0; i < kN; i += 2) {
    cutlass::Array<From, 2> pair;
    pair[0] = from(i);
    pair[1] = from(i + 1);
    cutlass::Array<To, 2> converted = converter(pair);
    to(i) = converted[0];
    to(i + 1) = converted[1];
  }
  return to;
}

}  // namespace flashcore::cuda
