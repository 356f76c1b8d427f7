// Rendering Graphviz source to a file with the `dot` program, for `fusor plan show --svg`. `dot`
// runs with an argument vector (posix_spawnp, no shell), so a path holding quotes, spaces or
// `$(...)` is only a file name. Stateless; thread-safe.
#pragma once

#include <string>

#include "base/status.h"

namespace fusor {

// Writes `dot_source` rendered as SVG to `path`. FailedPrecondition when `dot` is not installed;
// IOError naming the path when it fails.
Status RenderSvg(const std::string& dot_source, const std::string& path);

}  // namespace fusor
