#pragma once
/// Which pages a model's long-lived memory asks the kernel for: its weights (large tensors)
/// and a backend's packed constants. With 2 MiB pages (Linux's MADV_HUGEPAGE) a network
/// that streams large weights every run takes fewer TLB misses; their first touch is where
/// hosts differ. On bare metal a fresh 2 MiB page is about as cheap per MB as fresh 4 KiB
/// ones. In a virtual machine whose balloon device reports free memory to its host (free
/// page reporting: Firecracker, QEMU/KVM with virtio-balloon's reporting), every free block
/// of 2 MiB and more is handed back to the host a few seconds after it is freed, so a fresh
/// huge page is one the host must fault in and zero again, while 4 KiB pages mostly come
/// from blocks the host never took; there a model's start-up is set by its weights' MB in
/// huge pages (backends/CPU/README.md, "Huge pages and a cold start").

#include <string>

namespace kiln {

enum class PagePolicy {
  /// Huge pages unless the host takes free memory back (freshHugePagesAreHostFaults).
  Auto,
  /// Always ask for huge pages: the best run time, the slowest cold start on such a guest.
  Huge,
  /// Never ask: the kernel's default (4 KiB pages unless THP is set to "always").
  Small,
};

/// Sets the process's policy (Auto until called); applies to memory allocated afterwards.
void setPagePolicy(PagePolicy policy);
PagePolicy pagePolicy();

/// Parses "auto", "huge" or "small"; false for anything else.
bool parsePagePolicy(const std::string &text, PagePolicy *policy);

/// Whether weights and packed constants ask for huge pages under the current policy (Auto
/// looks at the host once per process).
bool longLivedMemoryInHugePages();

/// Whether a virtio balloon that reports free pages to its host is present under
/// \p sysfsRoot (normally "/sys"): a device bus/virtio/devices/*/device of 0x0005 whose
/// negotiated features (one character per bit, bit 0 first) have bit 5 set,
/// VIRTIO_BALLOON_F_REPORTING.
bool freshHugePagesAreHostFaults(const std::string &sysfsRoot);

} // namespace kiln
