#include "core/version.h"

#define HG_STRINGIFY_(x) #x
#define HG_STRINGIFY(x) HG_STRINGIFY_(x)

namespace hg {

const char* version() {
  return HG_STRINGIFY(HG_VERSION_MAJOR) "." HG_STRINGIFY(HG_VERSION_MINOR) "." HG_STRINGIFY(HG_VERSION_PATCH);
}

}  // namespace hg
