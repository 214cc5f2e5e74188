// Device buffers, CUDA-event timing and memory measurement shared by the CUDA executors.
#include "cuda_executor_base.h"

#include <cstdint>


namespace flashcore::cli {

Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::Ok();
  return Status::CudaError(std::string(what) + ": " + cudaGetErrorString(error));
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

Status DeviceBuffer::allocate(std::size_t bytes, const char* name) {
  FLASHCORE_RETURN_IF_ERROR(cuda_status(cudaMalloc(&data_, bytes), (std::string("cudaMalloc ") + name).c_str()));
  bytes_ = bytes;
  return Status::Ok();
}

Status DeviceBuffer::upload(const std::vector<std::byte>& host, const char* name) {
  FLASHCORE_RETURN_IF_ERROR(allocate(host.size(), name));
  return cuda_status(cudaMemcpy(data_, host.data(), host.size(), cudaMemcpyHostToDevice),
                     (std::string("cudaMemcpy ") + name).c_str());
}

CudaExecutorBase::~CudaExecutorBase() {
  for (cudaEvent_t event : {start_, forward_end_, end_}) {
    if (event != nullptr) cudaEventDestroy(event);
  }
}

Status CudaExecutorBase::init() {
  const Shape& s = job_.shape;
  const HostInputs& in = *job_.inputs;
  const std::size_t element_bytes = dtype_size(element_);
  FLASHCORE_RETURN_IF_ERROR(q_.upload(encode(in.q, element_), "q"));
  FLASHCORE_RETURN_IF_ERROR(k_.upload(encode(in.k, element_), "k"));
  FLASHCORE_RETURN_IF_ERROR(v_.upload(encode(in.v, element_), "v"));
  FLASHCORE_RETURN_IF_ERROR(out_.allocate(s.q_elements() * element_bytes, "out"));
  FLASHCORE_RETURN_IF_ERROR(lse_.allocate(s.lse_elements() * sizeof(float), "lse"));
  if (job_.backward) {
    FLASHCORE_RETURN_IF_ERROR(dout_.upload(encode(in.dout, element_), "dout"));
    FLASHCORE_RETURN_IF_ERROR(dq_.allocate(s.q_elements() * element_bytes, "dq"));
    FLASHCORE_RETURN_IF_ERROR(dk_.allocate(s.kv_elements() * element_bytes, "dk"));
    FLASHCORE_RETURN_IF_ERROR(dv_.allocate(s.kv_elements() * element_bytes, "dv"));
  }
  for (cudaEvent_t* event : {&start_, &forward_end_, &end_}) {
    FLASHCORE_RETURN_IF_ERROR(cuda_status(cudaEventCreate(event), "cudaEventCreate"));
  }
  int device = 0;
  cudaMemPool_t pool = nullptr;
  FLASHCORE_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  FLASHCORE_RETURN_IF_ERROR(cuda_status(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool"));
  // Writing 0 resets the high-water mark to what is in use now.
  std::uint64_t zero = 0;
  return cuda_status(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero), "cudaMemPoolSetAttribute");
}

Status CudaExecutorBase::synchronize() { return cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

Status CudaExecutorBase::poison_outputs() {
  // All-ones bytes are NaN in fp16, bf16 and fp32 alike.
  for (DeviceBuffer* buffer : {&out_, &lse_, &dq_, &dk_, &dv_}) {
    if (buffer->data() != nullptr) {
      FLASHCORE_RETURN_IF_ERROR(cuda_status(cudaMemset(buffer->data(), 0xFF, buffer->bytes()), "cudaMemset (poison)"));
    }
  }
  return Status::Ok();
}

Status CudaExecutorBase::read_outputs(HostOutputs* o) {
  auto read = [](const DeviceBuffer& buffer, DType dtype, std::vector<double>* values) {
    std::vector<std::byte> host(buffer.bytes());
    FLASHCORE_RETURN_IF_ERROR(cuda_status(cudaMemcpy(host.data(), buffer.data(), host.size(), cudaMemcpyDeviceToHost),
                                    "cudaMemcpy (read back)"));
    *values = decode(host.data(), dtype, static_cast<std::int64_t>(host.size() / dtype_size(dtype)));
    return Status::Ok();
  };
  FLASHCORE_RETURN_IF_ERROR(read(out_, element_, &o->out));
  FLASHCORE_RETURN_IF_ERROR(read(lse_, DType::kFloat32, &o->lse));
  if (job_.backward) {
    FLASHCORE_RETURN_IF_ERROR(read(dq_, element_, &o->dq));
    FLASHCORE_RETURN_IF_ERROR(read(dk_, element_, &o->dk));
    FLASHCORE_RETURN_IF_ERROR(read(dv_, element_, &o->dv));
  }
  return Status::Ok();
}

Status CudaExecutorBase::begin_pass() { return cuda_status(cudaEventRecord(start_, nullptr), "cudaEventRecord"); }

Status CudaExecutorBase::end_forward() {
  return cuda_status(cudaEventRecord(forward_end_, nullptr), "cudaEventRecord");
}

Status CudaExecutorBase::end_pass(double* forward_ms, double* total_ms) {
  FLASHCORE_RETURN_IF_ERROR(cuda_status(cudaEventRecord(end_, nullptr), "cudaEventRecord"));
  FLASHCORE_RETURN_IF_ERROR(cuda_status(cudaEventSynchronize(end_), "cudaEventSynchronize"));
  float forward = 0.0f;
  float total = 0.0f;
  FLASHCORE_RETURN_IF_ERROR(cuda_status(cudaEventElapsedTime(&forward, start_, forward_end_), "cudaEventElapsedTime"));
  FLASHCORE_RETURN_IF_ERROR(cuda_status(cudaEventElapsedTime(&total, start_, end_), "cudaEventElapsedTime"));
  *forward_ms = forward;
  *total_ms = total;
  return Status::Ok();
}

MemoryUse CudaExecutorBase::memory_use() {
  int device = 0;
  cudaMemPool_t pool = nullptr;
  std::uint64_t pool_high = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetDefaultMemPool(&pool, device) != cudaSuccess ||
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &pool_high) != cudaSuccess) {
    return {std::nullopt, "not measured (the CUDA memory pool could not be queried)"};
  }
  return {extra_workspace_ + static_cast<std::size_t>(pool_high),
          "measured: workspace given to the call + peak of stream-ordered (cudaMallocAsync) scratch"};
}

}  // namespace flashcore::cli
