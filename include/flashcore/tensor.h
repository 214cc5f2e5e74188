// Tensor views, element types and status codes of flashcore's public API.
//
// flashcore never owns user memory: every tensor is a view (pointer, shape, strides in elements).
// This header needs nothing from CUDA so CPU-only users can include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace flashcore {

// kInt32 is for index tensors (cu_seqlens, forward_kvcache's cache_seqlens, block_table, ...), never attention data.
enum class DType : int { kFloat16 = 0, kBFloat16 = 1, kFloat32 = 2, kInt32 = 3 };
enum class Device : int { kCPU = 0, kCUDA = 1 };

const char* dtype_name(DType dtype);
std::size_t dtype_size(DType dtype);
const char* device_name(Device device);

inline constexpr int kMaxRank = 4;

// A strided view of memory the caller owns. Strides are in elements, not bytes.
// A view with data == nullptr is "absent" (used for optional outputs such as the LSE).
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFloat16;
  Device device = Device::kCPU;
  int rank = 0;
  std::int64_t shape[kMaxRank] = {};
  std::int64_t stride[kMaxRank] = {};

  bool present() const { return data != nullptr; }
  std::int64_t numel() const;
};

// A row-major (contiguous) view of `shape`.
TensorView make_view(void* data, DType dtype, Device device, std::initializer_list<std::int64_t> shape);

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,  // the caller passed something the API rejects; nothing was written
  kNotSupported = 2,     // valid request this build or device cannot serve
  kCudaError = 3,        // the CUDA runtime reported an error
  kInternal = 4,
};

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string message) { return {StatusCode::kInvalidArgument, std::move(message)}; }
  static Status NotSupported(std::string message) { return {StatusCode::kNotSupported, std::move(message)}; }
  static Status CudaError(std::string message) { return {StatusCode::kCudaError, std::move(message)}; }
  static Status Internal(std::string message) { return {StatusCode::kInternal, std::move(message)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace flashcore

// Return the Status from the enclosing function when `expr` (a Status) is not ok: for code that
// makes several calls in a row, such as a caller chaining flashcore's functions.
#define FLASHCORE_RETURN_IF_ERROR(expr)      \
  do {                                       \
    ::flashcore::Status flashcore_status_ = (expr); \
    if (!flashcore_status_.ok()) return flashcore_status_; \
  } while (0)
