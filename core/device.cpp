#include "core/device.h"

#include <charconv>
#include <ostream>
#include <string>
#include <string_view>

#include "core/error.h"

namespace hg {

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.starts_with("cuda:")) {
    std::string_view num = text.substr(5);
    int index = -1;
    auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), index);
    if (ec == std::errc() && end == num.data() + num.size() && index >= 0) return cuda(index);
  }
  HG_FAIL("cannot parse device '", text, "'; expected \"cpu\", \"cuda\" or \"cuda:N\" with N >= 0");
}

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, Device d) { return os << d.str(); }

}  // namespace hg
