#include "kiln/Base/Pages.h"

#include <atomic>
#include <filesystem>
#include <fstream>

namespace kiln {
namespace {

std::atomic<PagePolicy> &policySlot() {
  static std::atomic<PagePolicy> p{PagePolicy::Auto};
  return p;
}

/// The first line of \p path, empty when it cannot be read.
std::string firstLine(const std::filesystem::path &path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

} // namespace

void setPagePolicy(PagePolicy policy) { policySlot().store(policy); }
PagePolicy pagePolicy() { return policySlot().load(); }

bool parsePagePolicy(const std::string &text, PagePolicy *policy) {
  if (text == "auto")
    *policy = PagePolicy::Auto;
  else if (text == "huge")
    *policy = PagePolicy::Huge;
  else if (text == "small")
    *policy = PagePolicy::Small;
  else
    return false;
  return true;
}

bool freshHugePagesAreHostFaults(const std::string &sysfsRoot) {
  constexpr const char *kBalloonDevice = "0x0005";
  constexpr size_t kReportingBit = 5;
  std::error_code ec;
  std::filesystem::directory_iterator it(std::filesystem::path(sysfsRoot) / "bus/virtio/devices",
                                         ec);
  if (ec)
    return false;
  for (const auto &dev : it) {
    if (firstLine(dev.path() / "device") != kBalloonDevice)
      continue;
    std::string features = firstLine(dev.path() / "features");
    if (features.size() > kReportingBit && features[kReportingBit] == '1')
      return true;
  }
  return false;
}

bool longLivedMemoryInHugePages() {
  switch (pagePolicy()) {
  case PagePolicy::Huge:
    return true;
  case PagePolicy::Small:
    return false;
  case PagePolicy::Auto:
    break;
  }
  static const bool hostFaults = freshHugePagesAreHostFaults("/sys");
  return !hostFaults;
}

} // namespace kiln
