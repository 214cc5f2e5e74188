// Views of wgmma register fragments. A 64xN wgmma accumulator gives each thread, per 8-column
// group, (col, col+1) x (row, row+8): its layout is ((2 cols, 2 rows, N/8), MMA_M, MMA_N).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/numeric_conversion.h>

namespace flashcore::cuda::sm90 {

// (rows, cols) = ((2, MMA_M), (2, N/8, MMA_N)) so row-wise code can index [row][col].
template <class Layout>
__forceinline__ __device__ auto wgmma_acc_as_rows_cols(Layout acc_layout) {
  using namespace cute;
  static_assert(decltype(rank<0>(acc_layout))::value == 3);
  return make_layout(make_layout(get<0, 1>(acc_layout), get<1>(acc_layout)),
                     make_layout(get<0, 0>(acc_layout), get<0, 2>(acc_layout), get<2>(acc_layout)));
}

// The S accumulator (M x N) reused as the register A operand of O += P V (K = N): a k16 slice
// of A is two neighbouring n8 column groups, so ((2,2,N/8), MMA_M, MMA_N) becomes
// ((2,2,2), MMA_M, N/16 * MMA_N). This is what keeps P in registers between the two GEMMs.
template <class Layout>
__forceinline__ __device__ auto wgmma_acc_as_a_operand(Layout acc_layout) {
  using namespace cute;
  static_assert(decltype(rank<0>(acc_layout))::value == 3);
  static_assert(decltype(size<0, 2>(acc_layout))::value % 2 == 0);
  auto groups = get<0>(logical_divide(get<0, 2>(acc_layout), Tile<_2>{}));  // (2, N/16)
  return make_layout(make_layout(get<0, 0>(acc_layout), get<0, 1>(acc_layout), get<0>(groups)),
                     get<1>(acc_layout), coalesce(make_layout(get<1>(groups), get<2>(acc_layout))));
}

}  // namespace flashcore::cuda::sm90

namespace flashcore::cuda::sm90 {

// Element-wise conversion of a register tensor into another of the same size (by storage
// order, so `to` may be a reshaped view of the same fragment); pairs go through one packed cvt.
template <class EngineFrom, class LayoutFrom, class EngineTo, class LayoutTo>
__forceinline__ __device__ void convert_into(cute::Tensor<EngineFrom, LayoutFrom> const& from,
                                             cute::Tensor<EngineTo, LayoutTo>& to) {
  using From = typename EngineFrom::value_type;
  using To = typename EngineTo::value_type;
  constexpr int kN = decltype(cute::size(from))::value;
  static_assert(kN % 2 == 0 && kN == decltype(cute::size(to))::value);
  cutlass::NumericArrayConverter<To, From, 2> converter;
  CUTE_UNROLL
  for (int i = 0; i < kN; i += 2) {
    cutlass::Array<From, 2> pair;
    pair[0] = from.data()[i];
    pair[1] = from.data()[i + 1];
    cutlass::Array<To, 2> converted = converter(pair);
    to.data()[i] = converted[0];
    to.data()[i + 1] = converted[1];
  }
}

}  // namespace flashcore::cuda::sm90
