// The teaching ladder's rungs (examples/ladder) behind the Executor interface. Compiled only when
// the build has the ladder (CUDA on, examples built); no_ladder.cpp stands in otherwise.
//
// A rung takes contiguous device buffers of its own element type (Rung::dtype): the run's inputs,
// already rounded to --dtype, are re-encoded to it, which is exact for a float32 rung.
#include "cuda_executor_base.h"
#include "ladder.h"

namespace flashcore::cli {
namespace {

ladder::LadderProblem ladder_problem(const Shape& s) {
  ladder::LadderProblem p;
  p.batch = static_cast<int>(s.batch);
  p.heads = static_cast<int>(s.heads_q);
  p.seqlen = static_cast<int>(s.seqlen_q);
  p.head_dim = static_cast<int>(s.head_dim);
  p.causal = s.causal;
  p.softmax_scale = softmax_scale(s);
  return p;
}

class LadderExecutor final : public CudaExecutorBase {
 public:
  LadderExecutor(const ladder::Rung& rung, const Job& job)
      : CudaExecutorBase(job, rung.dtype), rung_(rung), problem_(ladder_problem(job.shape)) {}

  Status prepare() { return init(); }

  Status forward() override {
    return rung_.forward(problem_, q_.data(), k_.data(), v_.data(), out_.data(), static_cast<float*>(lse_.data()),
                         nullptr);
  }

  Status backward() override {
    return rung_.backward(problem_, q_.data(), k_.data(), v_.data(), out_.data(), dout_.data(),
                          static_cast<const float*>(lse_.data()), dq_.data(), dk_.data(), dv_.data(), nullptr);
  }

 private:
  const ladder::Rung& rung_;
  ladder::LadderProblem problem_;
};

std::string join(const std::vector<int>& values) {
  std::string text;
  for (int v : values) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return text;
}

}  // namespace

std::vector<std::string> ladder_rung_names() {
  std::vector<std::string> names;
  for (const ladder::Rung& rung : ladder::rungs()) names.push_back(rung.name);
  return names;
}

std::string ladder_rung_help() {
  std::string help;
  for (const ladder::Rung& rung : ladder::rungs()) help += "                " + rung.name + ": " + rung.description + "\n";
  return help;
}

std::string ladder_request_error(const std::string& name, const Shape& s, DType dtype, bool backward) {
  const ladder::Rung* rung = ladder::find_rung(name);
  if (rung == nullptr) return "--impl " + name + ": no such ladder rung";
  const std::string prefix = "--impl " + name + ": ";
  bool head_dim_ok = false;
  for (int d : rung->head_dims) head_dim_ok = head_dim_ok || d == s.head_dim;
  if (!head_dim_ok) return prefix + "supports head dims " + join(rung->head_dims) + ", got " + std::to_string(s.head_dim);
  if (s.heads_kv != s.heads_q) return prefix + "has no GQA/MQA (--heads-kv must equal --heads)";
  if (s.seqlen_k != s.seqlen_q) return prefix + "needs --seqlen-k equal to --seqlen";
  if (backward && rung->backward == nullptr) return prefix + "has no backward";
  if (rung->dtype != DType::kFloat32 && rung->dtype != dtype) {
    return prefix + "computes in " + dtype_name(rung->dtype) + "; pass --dtype " +
           (rung->dtype == DType::kFloat16 ? "fp16" : "bf16");
  }
  return "";
}

Status make_ladder_executor(const std::string& name, const Job& job, std::unique_ptr<Executor>* executor,
                            DType* element_type) {
  const ladder::Rung* rung = ladder::find_rung(name);
  if (rung == nullptr) return Status::InvalidArgument("--impl " + name + ": no such ladder rung");
  auto ladder_executor = std::make_unique<LadderExecutor>(*rung, job);
  FLASHCORE_RETURN_IF_ERROR(ladder_executor->prepare());
  *element_type = rung->dtype;
  *executor = std::move(ladder_executor);
  return Status::Ok();
}

}  // namespace flashcore::cli
