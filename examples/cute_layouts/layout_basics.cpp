// Teaching demo: what a CuTe layout is. A layout maps a coordinate to an index; it is a shape
// (how many elements along each mode) paired with a stride (how far one step along that mode
// moves the index). CuTe prints it as shape:stride.
//
// Expected output, one layout per line:
//   _8:_1            8 elements, unit stride, both known at compile time (the leading _)
//   8:1              the same layout with run-time integers: same mapping, checked at run time
//   (_2,_4):(_1,_2)  a 2x4 matrix stored column-major: a step down a column moves 1, along a row 2
#include <iostream>

#include <cute/layout.hpp>

int main() {
  using namespace cute;

  // Static: shape and stride are types (Int<8>, Int<1>), so index arithmetic folds to constants.
  auto static_1d = make_layout(Int<8>{}, Int<1>{});
  // Dynamic: ordinary ints, for sizes known only at run time (sequence lengths, for instance).
  auto dynamic_1d = make_layout(8, 1);
  // Without a stride, make_layout chooses the column-major (LayoutLeft) one: stride (1, rows).
  auto column_major = make_layout(make_shape(Int<2>{}, Int<4>{}));

  std::cout << static_1d << "\n" << dynamic_1d << "\n" << column_major << "\n";
  return 0;
}
