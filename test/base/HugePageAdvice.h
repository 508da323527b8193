#pragma once
// Whether the mapping holding an address carries the huge-page advice (MADV_HUGEPAGE shows
// as "hg" among the VmFlags of its /proc/self/smaps entry): what the page policy
// (kiln/Base/Pages.h) decides, read from the kernel rather than from Kiln.

#include <cctype>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace kiln::testing {

/// True / false for the mapping that holds \p p; nullopt when /proc/self/smaps cannot be
/// read or lists no mapping holding it (not Linux, or the address is not mapped).
inline std::optional<bool> hugePageAdvised(const void *p) {
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
    if (inside && line.rfind("VmFlags:", 0) == 0)
      return (line + " ").find(" hg ") != std::string::npos;
  }
  return std::nullopt;
}

} // namespace kiln::testing
