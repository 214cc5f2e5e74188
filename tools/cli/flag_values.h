// Value parsers shared by the CLI's commands (`run`, `fuzz`): each checks one flag's value and, on
// failure, sets a one-line error naming the flag, so a bad value is a usage error (exit 2).
#pragma once

#include <charconv>
#include <string>
#include <string_view>

#include "flashcore/attention.h"
#include "options.h"

namespace flashcore::cli {

template <typename Int>
bool parse_int(std::string_view flag, std::string_view text, Int min_value, Int max_value, Int* value,
               std::string* error) {
  Int parsed = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, parsed);
  if (ec != std::errc() || ptr != end) {
    *error = std::string(flag) + ": expected an integer, got '" + std::string(text) + "'";
    return false;
  }
  if (parsed < min_value || parsed > max_value) {
    *error = std::string(flag) + ": must be between " + std::to_string(min_value) + " and " +
             std::to_string(max_value) + ", got " + std::string(text);
    return false;
  }
  *value = parsed;
  return true;
}

// --device auto|cpu|cuda
inline bool parse_device_choice(std::string_view value, DeviceChoice* device, std::string* error) {
  if (value == "auto") {
    *device = DeviceChoice::kAuto;
  } else if (value == "cpu") {
    *device = DeviceChoice::kCpu;
  } else if (value == "cuda") {
    *device = DeviceChoice::kCuda;
  } else {
    *error = "--device: expected auto, cpu or cuda, got '" + std::string(value) + "'";
    return false;
  }
  return true;
}

// --kernels auto|sm80|sm90
inline bool parse_kernel_family(std::string_view value, KernelFamily* kernels, std::string* error) {
  if (value == "auto") {
    *kernels = KernelFamily::kAuto;
  } else if (value == "sm80") {
    *kernels = KernelFamily::kSm80;
  } else if (value == "sm90") {
    *kernels = KernelFamily::kSm90;
  } else {
    *error = "--kernels: expected auto, sm80 or sm90, got '" + std::string(value) + "'";
    return false;
  }
  return true;
}

}  // namespace flashcore::cli
