// Host memory for `flashcore fuzz --device cpu`.
#include <cstring>
#include <vector>

#include "fuzz_memory.h"

namespace flashcore::cli {
namespace {

class HostStorage final : public DeviceStorage {
 public:
  explicit HostStorage(std::size_t bytes) : bytes_(bytes) {}
  void* data() override { return bytes_.data(); }
  Status upload(const void* host, std::size_t bytes) override {
    std::memcpy(bytes_.data(), host, bytes);
    return Status::Ok();
  }
  Status download(void* host, std::size_t bytes) override {
    std::memcpy(host, bytes_.data(), bytes);
    return Status::Ok();
  }

 private:
  std::vector<std::byte> bytes_;
};

class HostMemory final : public FuzzMemory {
 public:
  Device device() const override { return Device::kCPU; }
  Status allocate(std::size_t bytes, std::unique_ptr<DeviceStorage>* storage) override {
    *storage = std::make_unique<HostStorage>(bytes);
    return Status::Ok();
  }
  Status synchronize() override { return Status::Ok(); }
};

}  // namespace

std::unique_ptr<FuzzMemory> make_host_memory() { return std::make_unique<HostMemory>(); }

}  // namespace flashcore::cli
