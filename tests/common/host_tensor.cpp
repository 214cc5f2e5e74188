#include "common/host_tensor.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <cutlass/numeric_types.h>

namespace flashcore::testing {

HostTensor::HostTensor(DType dtype, std::vector<std::int64_t> shape, std::int64_t pad)
    : dtype_(dtype), shape_(std::move(shape)), strides_(shape_.size()) {
  if (shape_.empty() || shape_.size() > static_cast<size_t>(kMaxRank))
    throw std::invalid_argument("HostTensor: bad rank");
  std::int64_t stride = 1;
  for (size_t d = shape_.size(); d-- > 0;) {
    strides_[d] = stride;
    stride = stride * shape_[d] + pad;
  }
  storage_ = std::make_shared<std::vector<unsigned char>>(static_cast<size_t>(stride) * dtype_size(dtype));
}

HostTensor HostTensor::slice(const HostTensor& owner, std::int64_t offset, std::vector<std::int64_t> shape,
                             std::vector<std::int64_t> strides) {
  HostTensor t;
  t.dtype_ = owner.dtype_;
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  t.offset_ = owner.offset_ + offset;
  t.storage_ = owner.storage_;
  return t;
}

TensorView HostTensor::view() const {
  TensorView v;
  v.data = storage_->data() + offset_ * static_cast<std::int64_t>(dtype_size(dtype_));
  v.dtype = dtype_;
  v.device = Device::kCPU;
  v.rank = static_cast<int>(shape_.size());
  for (size_t d = 0; d < shape_.size(); ++d) {
    v.shape[d] = shape_[d];
    v.stride[d] = strides_[d];
  }
  return v;
}

std::int64_t HostTensor::numel() const {
  std::int64_t n = 1;
  for (std::int64_t s : shape_) n *= s;
  return n;
}

std::int64_t HostTensor::storage_offset(std::int64_t index) const {
  std::int64_t offset = offset_;
  for (size_t d = shape_.size(); d-- > 0;) {
    offset += (index % shape_[d]) * strides_[d];
    index /= shape_[d];
  }
  return offset;
}

double HostTensor::load(std::int64_t offset) const {
  const unsigned char* p = storage_->data() + offset * static_cast<std::int64_t>(dtype_size(dtype_));
  switch (dtype_) {
    case DType::kFloat16: {
      std::uint16_t bits;
      std::memcpy(&bits, p, 2);
      return static_cast<float>(cutlass::half_t::bitcast(bits));
    }
    case DType::kBFloat16: {
      std::uint16_t bits;
      std::memcpy(&bits, p, 2);
      return static_cast<float>(cutlass::bfloat16_t::bitcast(bits));
    }
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kInt32: {
      std::int32_t i;
      std::memcpy(&i, p, 4);
      return i;
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

void HostTensor::store(std::int64_t offset, double value) {
  unsigned char* p = storage_->data() + offset * static_cast<std::int64_t>(dtype_size(dtype_));
  const float f = static_cast<float>(value);
  switch (dtype_) {
    case DType::kFloat16: {
      const std::uint16_t bits = cutlass::half_t(f).raw();
      std::memcpy(p, &bits, 2);
      break;
    }
    case DType::kBFloat16: {
      const std::uint16_t bits = cutlass::bfloat16_t(f).raw();
      std::memcpy(p, &bits, 2);
      break;
    }
    case DType::kInt32: {
      const auto i = static_cast<std::int32_t>(value);
      std::memcpy(p, &i, 4);
      break;
    }
    case DType::kFloat32:
      std::memcpy(p, &f, 4);
      break;
  }
}

double HostTensor::get(std::int64_t index) const { return load(storage_offset(index)); }
void HostTensor::set(std::int64_t index, double value) { store(storage_offset(index), value); }

std::vector<double> HostTensor::values() const {
  std::vector<double> out(static_cast<size_t>(numel()));
  for (std::int64_t i = 0; i < numel(); ++i) out[static_cast<size_t>(i)] = get(i);
  return out;
}

void HostTensor::fill_normal(std::mt19937_64& rng, double stddev) {
  std::normal_distribution<double> normal(0.0, stddev);
  for (std::int64_t i = 0; i < numel(); ++i) set(i, normal(rng));
}

void HostTensor::poison() {
  const std::int64_t elements = static_cast<std::int64_t>(storage_->size() / dtype_size(dtype_));
  for (std::int64_t e = 0; e < elements; ++e) store(e, std::numeric_limits<double>::quiet_NaN());
}

bool HostTensor::all_poisoned() const {
  const std::int64_t elements = static_cast<std::int64_t>(storage_->size() / dtype_size(dtype_));
  for (std::int64_t e = 0; e < elements; ++e) {
    if (!std::isnan(load(e))) return false;
  }
  return true;
}

bool HostTensor::outside_view_untouched() const {
  const std::int64_t elements = static_cast<std::int64_t>(storage_->size() / dtype_size(dtype_));
  std::vector<bool> in_view(static_cast<size_t>(elements), false);
  for (std::int64_t i = 0; i < numel(); ++i) in_view[static_cast<size_t>(storage_offset(i))] = true;
  for (std::int64_t e = 0; e < elements; ++e) {
    if (!in_view[static_cast<size_t>(e)] && !std::isnan(load(e))) return false;
  }
  return true;
}

}  // namespace flashcore::testing
