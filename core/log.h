// Logging. Quiet by default (warnings and errors only); set
// HG_LOG_LEVEL=trace|debug|info|warn|error|off to change it.
//
// The messages are formatted with fmt ("{}" placeholders) where they are
// written; spdlog, which prints them, stays inside core/log.cpp (it is linked
// PRIVATE), so code that includes this header needs fmt but not spdlog.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace hg {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// The library logger's level (from HG_LOG_LEVEL on first use, else kWarn).
LogLevel log_level();
void set_log_level(LogLevel level);
// True when a message of this level is printed (kOff: never).
bool log_enabled(LogLevel level);
// Prints one formatted message to stderr as "[time] [halfgrad] [level] message".
void log_write(LogLevel level, std::string_view message);

}  // namespace hg

// The arguments are only formatted when the level is enabled.
#define HG_LOG_AT(level, ...)                                   \
  do {                                                          \
    if (::hg::log_enabled(level)) {                             \
      ::hg::log_write(level, ::fmt::format(__VA_ARGS__));       \
    }                                                           \
  } while (false)
#define HG_LOG_TRACE(...) HG_LOG_AT(::hg::LogLevel::kTrace, __VA_ARGS__)
#define HG_LOG_DEBUG(...) HG_LOG_AT(::hg::LogLevel::kDebug, __VA_ARGS__)
#define HG_LOG_INFO(...) HG_LOG_AT(::hg::LogLevel::kInfo, __VA_ARGS__)
#define HG_LOG_WARN(...) HG_LOG_AT(::hg::LogLevel::kWarn, __VA_ARGS__)
#define HG_LOG_ERROR(...) HG_LOG_AT(::hg::LogLevel::kError, __VA_ARGS__)
