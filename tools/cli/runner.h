// The implementations `flashcore run --impl` can time, behind one interface.
//
// An Executor owns one problem's buffers on its device (inputs copied in, outputs allocated) and
// runs one implementation on them; run_loop.cpp drives it (warm-up, timed passes, the checked
// pass) the same way for every implementation and device.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "flashcore/attention.h"
#include "flashcore/tensor.h"
#include "host_data.h"

namespace flashcore::cli {

// What the memory line reports: the scratch an implementation needs beyond its inputs and
// outputs, and how that number was obtained.
struct MemoryUse {
  std::optional<std::size_t> extra_bytes;  // empty: not known
  std::string how;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual Status forward() = 0;
  virtual Status backward() = 0;
  // Wait until the work issued so far has finished (a no-op where calls are synchronous).
  virtual Status synchronize() = 0;
  // Fill every output with NaN so a result the implementation failed to write cannot pass.
  virtual Status poison_outputs() = 0;
  virtual Status read_outputs(HostOutputs* outputs) = 0;
  // One timed pass: begin_pass(), forward(), end_forward(), [backward()], end_pass().
  virtual Status begin_pass() = 0;
  virtual Status end_forward() = 0;
  virtual Status end_pass(double* forward_ms, double* total_ms) = 0;
  virtual MemoryUse memory_use() = 0;
  // The GPU kernel family a pass runs ("" where that does not apply).
  virtual std::string kernels(bool /*backward*/) { return ""; }
};

// What every executor is built from.
struct Job {
  Shape shape;
  DType dtype = DType::kFloat16;  // the run's element type (--dtype)
  bool backward = false;
  bool deterministic = false;  // the backward's deterministic mode (BackwardParams::deterministic)
  KernelFamily kernels = KernelFamily::kAuto;  // CUDA: the GPU kernel family (--kernels)
  int threads = 0;
  const HostInputs* inputs = nullptr;
};

// The executor for an implementation on one device, or an error saying why it cannot run there.
// impl: "flashcore" (the CPU flash backend) or "reference" (the float64 oracle).
Status make_cpu_executor(const std::string& impl, const Job& job, std::unique_ptr<Executor>* executor);
Status make_cuda_executor(const Job& job, std::unique_ptr<Executor>* executor);
// A teaching-ladder rung on CUDA. *element_type: the dtype the rung computes in (a float32 rung
// says float32 although its inputs were rounded to --dtype).
Status make_ladder_executor(const std::string& rung, const Job& job, std::unique_ptr<Executor>* executor,
                            DType* element_type);

// Whether this build has CUDA and a device is present, and the current device's name.
bool cuda_device_present();
std::string cuda_device_name();
// The names --impl accepts in this build: flashcore, reference, then the ladder's rungs.
std::vector<std::string> impl_names();
std::vector<std::string> ladder_rung_names();
// One "  name  description" line per rung, for --help ("" without the ladder).
std::string ladder_rung_help();
// Why the rung cannot run this request ("" when it can): head dims it lacks, GQA, seqlen_q !=
// seqlen_k, a backward it does not have, a dtype it cannot take.
std::string ladder_request_error(const std::string& rung, const Shape& shape, DType dtype, bool backward);

}  // namespace flashcore::cli
