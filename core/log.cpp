#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace hg {

namespace {
std::shared_ptr<spdlog::logger> make_logger() {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto log = std::make_shared<spdlog::logger>("halfgrad", sink);
  log->set_pattern("[%H:%M:%S.%e] [halfgrad] [%^%l%$] %v");
  log->set_level(spdlog::level::warn);
  if (const char* env = std::getenv("HG_LOG_LEVEL"); env != nullptr && *env != '\0') {
    const std::string name(env);
    const auto level = spdlog::level::from_str(name);
    // from_str returns off for unknown names; only accept "off" when asked for.
    if (level == spdlog::level::off && name != "off") {
      log->warn("HG_LOG_LEVEL='{}' is not a level; use trace, debug, info, warn, error or off",
                name);
    } else {
      log->set_level(level);
    }
  }
  return log;
}
}  // namespace

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = make_logger();
  return *instance;
}

void set_log_level(spdlog::level::level_enum level) { logger().set_level(level); }

}  // namespace hg
