#pragma once
// The kernel's page advice on the mapping that holds an address, read from
// /proc/self/smaps (MADV_HUGEPAGE shows as "hg" among its VmFlags, MADV_NOHUGEPAGE as
// "nh"): what the page policy (kiln/Base/Pages.h) decided, read from the kernel rather
// than from Kiln; and a scope that restores the page policy a test changes.

#include "kiln/Base/Pages.h"

#include <cctype>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace kiln::testing {

enum class PageAdvice { Huge, NoHuge, None };

/// The advice on the mapping that holds \p p; nullopt when /proc/self/smaps cannot be read
/// or lists no mapping holding it (not Linux, or the address is not mapped).
inline std::optional<PageAdvice> pageAdviceAt(const void *p) {
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps)
    return std::nullopt;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  std::string line;
  while (std::getline(smaps, line)) {
    // A mapping's first line is "lo-hi perms offset dev inode [path]" (lower-case hex);
    // the lines after it are "Key: value" with capitalised keys.
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        !std::isupper(static_cast<unsigned char>(line[0]))) {
      unsigned long long lo = 0, hi = 0;
      char dash = 0;
      std::istringstream head(line);
      inside = (head >> std::hex >> lo >> dash >> hi) && dash == '-' && addr >= lo && addr < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) {
      const std::string flags = line + " ";
      if (flags.find(" hg ") != std::string::npos)
        return PageAdvice::Huge;
      if (flags.find(" nh ") != std::string::npos)
        return PageAdvice::NoHuge;
      return PageAdvice::None;
    }
  }
  return std::nullopt;
}

/// Restores the process's page policy when a test (or one that fails early) ends.
struct PagePolicyScope {
  PagePolicy saved = pagePolicy();
  ~PagePolicyScope() { setPagePolicy(saved); }
};

} // namespace kiln::testing
