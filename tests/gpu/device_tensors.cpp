// See device_tensors.h.
#include "device_tensors.h"

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace flashcore::testing {
namespace {

void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(error));
}

std::int64_t span_of(const TensorView& t) {
  std::int64_t last = 0;
  for (int i = 0; i < t.rank; ++i) last += (t.shape[i] - 1) * t.stride[i];
  return last + 1;
}

}  // namespace

std::string gpu_unavailable_reason() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no usable CUDA device (") + cudaGetErrorString(error) + ")";
  }
  if (count == 0) return "no CUDA device on this machine";
  int major = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  if (major < 8) return "the GPU kernels need compute capability 8.0 or newer";
  return "";
}

bool run_lacks_kernel(const Status& status, const std::string& case_name) {
  if (status.code() != StatusCode::kNotSupported) return false;
  const std::string& message = status.message();
  // select_kernel's wordings (src/cuda/dispatch.cu): a forced family without the dtype/head dim or
  // without one of the case's options (kernels=auto would fall back; forcing a family is how the
  // device runs put one family through the whole grid), or kernels=auto in a trimmed build.
  const bool forced_family = message.find("family has no kernel for dtype") != std::string::npos;
  const bool forced_family_option = message.find("family does not support") != std::string::npos;
  const bool trimmed_build = message.find("no CUDA kernel for dtype") != std::string::npos;
  if (!forced_family && !forced_family_option && !trimmed_build) return false;
  std::printf("note: skipped %s: %s\n", case_name.c_str(), message.c_str());
  return true;
}

DeviceMirror::DeviceMirror(const HostTensor& host) : host_view_(host.view()), span_elements_(span_of(host_view_)) {
  check(cudaMalloc(&device_, span_elements_ * dtype_size(host_view_.dtype)), "cudaMalloc");
  poison();
}

DeviceMirror::~DeviceMirror() { cudaFree(device_); }

TensorView DeviceMirror::view() const {
  TensorView t = host_view_;
  t.data = device_;
  t.device = Device::kCUDA;
  return t;
}

void DeviceMirror::upload(const HostTensor& host) {
  check(cudaMemcpy(device_, host.view().data, span_elements_ * dtype_size(host_view_.dtype), cudaMemcpyHostToDevice),
        "upload");
}

void DeviceMirror::poison() {
  check(cudaMemset(device_, 0xFF, span_elements_ * dtype_size(host_view_.dtype)), "poison");
}

void DeviceMirror::download_into(HostTensor& host) const {
  const std::size_t elem = dtype_size(host_view_.dtype);
  std::vector<unsigned char> span(span_elements_ * elem);
  check(cudaMemcpy(span.data(), device_, span.size(), cudaMemcpyDeviceToHost), "download");
  // Element by element through the strides: slices of one packed host buffer interleave, so a
  // bulk copy of the span would overwrite the other slices' values.
  const TensorView& t = host_view_;
  auto* dst = static_cast<unsigned char*>(host.view().data);
  std::int64_t index[kMaxRank] = {};
  const std::int64_t n = t.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t offset = 0;
    for (int d = 0; d < t.rank; ++d) offset += index[d] * t.stride[d];
    std::memcpy(dst + offset * elem, span.data() + offset * elem, elem);
    for (int d = t.rank - 1; d >= 0; --d) {
      if (++index[d] < t.shape[d]) break;
      index[d] = 0;
    }
  }
}

DeviceAttentionTensors::DeviceAttentionTensors(const AttentionTensors& host)
    : q(host.q), k(host.k), v(host.v), dout(host.dout), out(host.out), lse(host.lse), dq(host.dq), dk(host.dk),
      dv(host.dv), host_forward_(host.forward_params(Backend::kCuda)),
      host_backward_(host.backward_params(Backend::kCuda)) {
  q.upload(host.q);
  k.upload(host.k);
  v.upload(host.v);
  dout.upload(host.dout);
  const TensorView slopes = host.alibi_view();
  if (slopes.present()) {
    const std::size_t bytes = static_cast<std::size_t>(slopes.numel()) * sizeof(float);
    check(cudaMalloc(&alibi_, bytes), "alibi_slopes allocation");
    check(cudaMemcpy(alibi_, slopes.data, bytes, cudaMemcpyHostToDevice), "alibi_slopes upload");
    alibi_view_ = slopes;
    alibi_view_.data = alibi_;
    alibi_view_.device = Device::kCUDA;
  }
}

DeviceAttentionTensors::~DeviceAttentionTensors() {
  if (alibi_ != nullptr) cudaFree(alibi_);
}

ForwardParams DeviceAttentionTensors::forward_params() const {
  ForwardParams p = host_forward_;
  p.q = q.view();
  p.k = k.view();
  p.v = v.view();
  p.out = out.view();
  p.lse = lse.view();
  p.alibi_slopes = alibi_view_;
  return p;
}

BackwardParams DeviceAttentionTensors::backward_params() const {
  BackwardParams p = host_backward_;
  p.q = q.view();
  p.k = k.view();
  p.v = v.view();
  p.out = out.view();
  p.dout = dout.view();
  p.lse = lse.view();
  p.dq = dq.view();
  p.dk = dk.view();
  p.dv = dv.view();
  p.alibi_slopes = alibi_view_;
  return p;
}

void DeviceAttentionTensors::poison_outputs() {
  for (DeviceMirror* m : {&out, &lse, &dq, &dk, &dv}) m->poison();
}

void DeviceAttentionTensors::download_forward_outputs(AttentionTensors& host) const {
  out.download_into(host.out);
  lse.download_into(host.lse);
}

void DeviceAttentionTensors::download_backward_outputs(AttentionTensors& host) const {
  dq.download_into(host.dq);
  dk.download_into(host.dk);
  dv.download_into(host.dv);
}

}  // namespace flashcore::testing
