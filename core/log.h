// Logging through spdlog. Quiet by default (warnings and errors only); set
// HG_LOG_LEVEL=trace|debug|info|warn|error|off to change it.
#pragma once

#include <spdlog/spdlog.h>

namespace hg {

// The library's logger ("halfgrad"), created on first use with the level from
// HG_LOG_LEVEL. An unknown level name falls back to warn and says so once.
spdlog::logger& logger();
void set_log_level(spdlog::level::level_enum level);

}  // namespace hg

#define HG_LOG_TRACE(...) ::hg::logger().trace(__VA_ARGS__)
#define HG_LOG_DEBUG(...) ::hg::logger().debug(__VA_ARGS__)
#define HG_LOG_INFO(...) ::hg::logger().info(__VA_ARGS__)
#define HG_LOG_WARN(...) ::hg::logger().warn(__VA_ARGS__)
#define HG_LOG_ERROR(...) ::hg::logger().error(__VA_ARGS__)
