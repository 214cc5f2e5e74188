// The driver's cuTensorMapEncodeTiled, looked up once a process, for CuTe's make_tma_copy.
//
// Without CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL, cutlass/cuda_host_adapter.hpp's
// call_cuTensorMapEncodeTiled asks cudaGetDriverEntryPointByVersion for the function on every call,
// and every sm90 launch encodes four TMA descriptors (Q, K, V and O or dO): a symbol lookup each,
// on the host path of every call (docs/tuning/binding_overhead.md). Calling the driver directly
// would link libcuda, which the library must not need to load on a machine without a GPU (its CPU
// backend runs there). So the sm90 family compiles with the direct call and with
// cuTensorMapEncodeTiled renamed to the function below (generate.py's sm90 "flags"): cuda.h then
// declares this function under that name, CuTe calls it, and it forwards to the driver's, found once.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

namespace {

PFN_cuTensorMapEncodeTiled_v12000 find_encode_tiled() {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if __CUDACC_VER_MAJOR__ > 12
  const cudaError_t error =
      cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found);
#else
  const cudaError_t error = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &function, cudaEnableDefault, &found);
#endif
  if (error != cudaSuccess || found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();  // the launch reports the failed encode; leave no sticky error behind
    return nullptr;
  }
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
}

}  // namespace

// The name cuda.h declares cuTensorMapEncodeTiled under in this family's files.
extern "C" CUresult CUDAAPI flashcore_sm90_encode_tensor_map_tiled(
    CUtensorMap* tensor_map, CUtensorMapDataType data_type, cuuint32_t rank, void* global_address,
    const cuuint64_t* global_dim, const cuuint64_t* global_strides, const cuuint32_t* box_dim,
    const cuuint32_t* element_strides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
    CUtensorMapL2promotion l2_promotion, CUtensorMapFloatOOBfill oob_fill) {
  // A failed lookup is not cached: the next call asks again (CUDA may not have been initialised).
  static const PFN_cuTensorMapEncodeTiled_v12000 cached = find_encode_tiled();
  const PFN_cuTensorMapEncodeTiled_v12000 encode = cached != nullptr ? cached : find_encode_tiled();
  if (encode == nullptr) return CUDA_ERROR_NOT_FOUND;
  return encode(tensor_map, data_type, rank, global_address, global_dim, global_strides, box_dim, element_strides,
                interleave, swizzle, l2_promotion, oob_fill);
}
