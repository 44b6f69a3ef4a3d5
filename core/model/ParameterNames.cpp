//===- ParameterNames.cpp - parameter names across versions ---------------===//

#include "core/model/ParameterNames.h"

#include <cctype>
#include <string_view>

namespace hypipe {
namespace {} // namespace

std::string legacyParameterName(const std::string &name) {
  const std::string_view n = name;
  // Only decoder layers were renamed.
  if (n.rfind("decoder.layers.", 0) != 0)
    return name;
  const size_t dot = n.find('.', 15);
  if (dot == std::string_view::npos)
    return name;
  const std::string layer(n.substr(0, dot + 1)); // "decoder.layers.i."
  const std::string_view rest = n.substr(dot + 1);
  if (rest == "mixer.in_proj.layer_norm_weight")
    return layer + "norm.weight";
  if (rest == "mixer.conv1d_weight")
    return layer + "mixer.conv1d.weight";
  if (rest == "mixer.conv1d_bias")
    return layer + "mixer.conv1d.bias";
  // Grouped experts: mlp.experts.linear_fc{1,2}.weight<E>.
  for (std::string_view fc : {"linear_fc1", "linear_fc2"}) {
    const std::string prefix = "mlp.experts." + std::string(fc) + ".weight";
    if (rest.rfind(prefix, 0) != 0)
      continue;
    const std::string_view expert = rest.substr(prefix.size());
    if (expert.empty() || expert.size() > 9)
      return name;
    for (char c : expert)
      if (!std::isdigit(static_cast<unsigned char>(c)))
        return name;
    return layer + "mlp.experts.local_experts." + std::string(expert) + "." +
           std::string(fc) + ".weight";
  }
  return name;
}

} // namespace hypipe
