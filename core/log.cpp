#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

namespace hg {

namespace {
spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return spdlog::level::trace;
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarn: return spdlog::level::warn;
    case LogLevel::kError: return spdlog::level::err;
    case LogLevel::kOff: break;
  }
  return spdlog::level::off;
}

LogLevel from_spdlog(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace: return LogLevel::kTrace;
    case spdlog::level::debug: return LogLevel::kDebug;
    case spdlog::level::info: return LogLevel::kInfo;
    case spdlog::level::warn: return LogLevel::kWarn;
    case spdlog::level::err:
    case spdlog::level::critical: return LogLevel::kError;
    default: return LogLevel::kOff;
  }
}

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

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = make_logger();
  return *instance;
}
}  // namespace

LogLevel log_level() { return from_spdlog(logger().level()); }

void set_log_level(LogLevel level) { logger().set_level(to_spdlog(level)); }

bool log_enabled(LogLevel level) {
  return level != LogLevel::kOff && logger().should_log(to_spdlog(level));
}

void log_write(LogLevel level, std::string_view message) {
  logger().log(to_spdlog(level), "{}", message);
}

}  // namespace hg
