// Host memory for test tensors: fp16 / bf16 / fp32 storage plus a strided view into it, with the
// helpers every attention test needs: seeded random fill, NaN poisoning, reading values back as
// double, and checking that nothing outside the view was written.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "flashcore/tensor.h"

namespace flashcore::testing {

class HostTensor {
 public:
  HostTensor() = default;

  // A row-major tensor of `shape`. With pad > 0 every dimension but the last gets `pad` extra
  // elements in its stride, so the view is not contiguous (only its last dimension is) and the
  // padding shows whether a kernel wrote outside the view.
  HostTensor(DType dtype, std::vector<std::int64_t> shape, std::int64_t pad = 0);

  // A view into `owner`'s storage starting `offset` elements in, with explicit strides: e.g. q as a
  // slice of a packed (batch, seqlen, 3, heads, head_dim) qkv buffer.
  static HostTensor slice(const HostTensor& owner, std::int64_t offset, std::vector<std::int64_t> shape,
                          std::vector<std::int64_t> strides);

  TensorView view() const;
  DType dtype() const { return dtype_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t numel() const;

  // Element `index` of the view in row-major logical order, and all of them.
  double get(std::int64_t index) const;
  void set(std::int64_t index, double value);  // rounds to the dtype
  std::vector<double> values() const;

  // Independent N(0, stddev) values, rounded to the dtype, into the view's elements.
  void fill_normal(std::mt19937_64& rng, double stddev = 1.0);
  // A quiet NaN in every element of the storage, padding included.
  void poison();
  // Whether every storage element, view and padding, still holds the NaN poison() wrote.
  bool all_poisoned() const;
  // Whether every storage element outside this view still holds the NaN poison() wrote. Only
  // meaningful for a tensor that owns its storage alone (not a slice of a shared buffer).
  bool outside_view_untouched() const;

 private:
  std::int64_t storage_offset(std::int64_t index) const;
  double load(std::int64_t offset) const;
  void store(std::int64_t offset, double value);

  DType dtype_ = DType::kFloat32;
  std::vector<std::int64_t> shape_;
  std::vector<std::int64_t> strides_;
  std::int64_t offset_ = 0;
  std::shared_ptr<std::vector<unsigned char>> storage_;
};

}  // namespace flashcore::testing
