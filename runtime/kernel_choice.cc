#include "runtime/kernel_choice.h"

#include <algorithm>

namespace fusor {

std::vector<std::string> OfferedImplementations(const std::function<dnnl::primitive_desc()>& make) {
  dnnl::primitive_desc pd = make();
  std::vector<std::string> names;
  do {
    std::string name = pd.impl_info_str();
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  } while (pd.next_impl());
  return names;
}

Status KernelNotOffered(const std::string& what, const std::string& kernel,
                        const std::vector<std::string>& offered) {
  std::string list;
  for (const std::string& name : offered) list += (list.empty() ? "" : ", ") + name;
  return Status::FailedPrecondition(
      what + ": the plan's kernel '" + kernel +
      "' is not offered by oneDNN on this CPU (under DNNL_MAX_CPU_ISA, if set); it offers " + list +
      ". Tune the model on this CPU, or remove the group's \"kernel\" from the plan JSON");
}

}  // namespace fusor
