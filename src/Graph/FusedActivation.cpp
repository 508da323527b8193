#include "kiln/Graph/FusedActivation.h"

namespace kiln {

namespace {

#define KILN_FUSED_ACTIVATION_NAME(name) #name,
constexpr const char *kNames[] = {KILN_FUSED_ACTIVATIONS(KILN_FUSED_ACTIVATION_NAME)};
#undef KILN_FUSED_ACTIVATION_NAME

constexpr size_t kCount = sizeof(kNames) / sizeof(kNames[0]);

} // namespace

std::optional<FusedActivation> parseFusedActivation(const std::string &name) {
  for (size_t i = 0; i < kCount; i++)
    if (name == kNames[i])
      return FusedActivation(i);
  return std::nullopt;
}

const char *getFusedActivationName(FusedActivation a) { return kNames[size_t(a)]; }

std::string fusedActivationNames() {
  std::string s;
  for (size_t i = 0; i < kCount; i++)
    s += (i ? ", " : "") + std::string(kNames[i]);
  return s;
}

} // namespace kiln
