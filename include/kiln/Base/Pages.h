#pragma once
/// Which pages a model's long-lived memory asks the kernel for: its large tensors (the
/// weights among them) and a backend's packed constants. With 2 MiB pages (Linux's
/// MADV_HUGEPAGE) a network that streams large weights every run takes fewer TLB misses;
/// their first touch is where hosts differ: a fresh huge page is one fault where 4 KiB
/// pages are 512, but in a virtual machine whose balloon device reports free
/// memory to its host (free page reporting: Firecracker, QEMU/KVM virtio-balloon), the
/// free blocks of 2 MiB and more go back to the host a few seconds after they are freed,
/// so an idle guest's fresh huge pages are ones the host faults in and zeroes again,
/// several times the cost per MB of 4 KiB pages, which mostly come from smaller blocks the
/// host never took. There a large model's cold start is set by the MB it puts in huge
/// pages (backends/CPU/README.md, "Huge pages and a cold start"). Timing a first touch does
/// not tell the two apart: the guest keeps a few huge blocks it has not reported yet, so
/// the first ones are cheap and the bulk is not.

#include <string>

namespace kiln {

enum class PagePolicy {
  /// Huge pages unless the host takes free memory back (freshHugePagesAreHostFaults).
  Auto,
  /// Always ask for huge pages: the fastest runs, the slowest cold start on such a guest.
  Huge,
  /// Ask for 4 KiB pages (MADV_NOHUGEPAGE, also where the kernel's THP setting is
  /// "always").
  Small,
};

/// Sets the process's policy (Auto until called); applies to memory allocated afterwards.
void setPagePolicy(PagePolicy policy);
PagePolicy pagePolicy();

/// Parses "auto", "huge" or "small"; false for anything else.
bool parsePagePolicy(const std::string &text, PagePolicy *policy);

/// Whether large tensors and packed constants ask for huge pages under the current policy
/// (Auto looks at the host once per process).
bool longLivedMemoryInHugePages();

/// Whether a virtio balloon that reports free pages to its host is present under
/// \p sysfsRoot (normally "/sys"): a device bus/virtio/devices/*/device of 0x0005 whose
/// negotiated features (one character per bit, bit 0 first) have bit 5 set,
/// VIRTIO_BALLOON_F_REPORTING.
bool freshHugePagesAreHostFaults(const std::string &sysfsRoot);

} // namespace kiln
