// Small helpers behind flashcore/tensor.h.
#include "flashcore/tensor.h"

namespace flashcore {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
    case DType::kFloat32: return "float32";
    case DType::kInt32: return "int32";
  }
  return "unknown";
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
    case DType::kBFloat16: return 2;
    case DType::kFloat32:
    case DType::kInt32: return 4;
  }
  return 0;
}

const char* device_name(Device device) {
  switch (device) {
    case Device::kCPU: return "cpu";
    case Device::kCUDA: return "cuda";
  }
  return "unknown";
}

std::int64_t TensorView::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[i];
  return n;
}

TensorView make_view(void* data, DType dtype, Device device, std::initializer_list<std::int64_t> shape) {
  TensorView t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.rank = static_cast<int>(shape.size());
  int i = 0;
  for (std::int64_t s : shape) {
    if (i < kMaxRank) t.shape[i] = s;
    ++i;
  }
  std::int64_t stride = 1;
  for (int d = t.rank - 1; d >= 0; --d) {
    if (d < kMaxRank) t.stride[d] = stride;
    if (d < kMaxRank) stride *= t.shape[d];
  }
  return t;
}

}  // namespace flashcore
