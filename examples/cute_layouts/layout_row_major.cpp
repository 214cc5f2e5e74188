// Teaching demo: the same 2x4 matrix stored row-major, and the index each coordinate maps to.
// Row-major means a step along a row (the second mode) moves 1 and a step down a column moves 4,
// the row length: stride (_4,_1). Calling the layout with a coordinate (row, col) returns
// row * 4 + col, the offset of that element in memory.
//
// Expected output:
//   (_2,_4):(_4,_1)
//   0 1 2 3
//   4 5 6 7
#include <iostream>

#include <cute/layout.hpp>

int main() {
  using namespace cute;

  // LayoutRight is CuTe's name for "rightmost mode contiguous", i.e. row-major.
  auto row_major = make_layout(make_shape(Int<2>{}, Int<4>{}), LayoutRight{});
  std::cout << row_major << "\n";

  for (int row = 0; row < size<0>(row_major); ++row) {
    for (int col = 0; col < size<1>(row_major); ++col) {
      std::cout << (col ? " " : "") << row_major(row, col);
    }
    std::cout << "\n";
  }
  return 0;
}
