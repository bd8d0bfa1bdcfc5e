// hg::Device — where a tensor's memory lives: the CPU or CUDA device N.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

namespace hg {

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };
inline constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // always 0 for the CPU

  static constexpr Device cpu() { return {DeviceType::CPU, 0}; }
  // Checks nothing: using a CUDA device that does not exist fails at first use
  // with an hg::Error naming how many devices there are.
  static constexpr Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  // "cpu", "cuda", "cuda:1"; throws hg::Error for anything else.
  static Device parse(std::string_view text);

  constexpr bool is_cpu() const { return type == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;  // "cpu", "cuda:0"

  friend constexpr bool operator==(Device a, Device b) {
    return a.type == b.type && a.index == b.index;
  }
};

std::ostream& operator<<(std::ostream& os, Device d);

}  // namespace hg
