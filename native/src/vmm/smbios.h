// Smbios: the SMBIOS tables a directly booted guest reads its system identity from (QEMU and Cloud Hypervisor put
// them at 0xf0000 for a direct kernel boot; Linux's dmi_scan_machine() looks for the entry point on a 16-byte
// boundary in 0xf0000-0xfffff). Pure: BuildSmbiosTables returns the bytes to copy to kSmbiosAddr.
//
//   0xf0000  "_SM3_" 64-bit entry point (SMBIOS 3.0, 24 bytes, checksummed) --> structure table address
//   0xf0020  type 0   BIOS information (vendor "kubevirt-ts")
//            type 1   system information: manufacturer "KubeVirt", product "None", family "KubeVirt" (KubeVirt's
//                     defaults), the VMI's firmware.uuid as the system UUID, firmware.serial when given
//            type 127 end of table
//
// UUID bytes (SMBIOS 2.6+, section 7.2.1): time_low, time_mid and time_hi_and_version little-endian, the rest in
// order; Linux prints them back as the canonical text in /sys/class/dmi/id/product_uuid.
// The tables sit in the e820-reserved BIOS area (vmm/linux_boot.h), so the kernel never reuses that memory.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvmts::vmm {

inline constexpr uint64_t kSmbiosAddr = 0xf0000;
inline constexpr size_t kSmbiosEntryBytes = 0x18;
inline constexpr uint64_t kSmbiosTableAddr = kSmbiosAddr + 0x20;
// The whole blob stays inside the BIOS area (below 1 MiB).
inline constexpr size_t kSmbiosMaxBytes = 0x10000;

// What the guest sees as its system identity.
struct SmbiosInfo {
  std::array<uint8_t, 16> uuid{};  // in SMBIOS byte order (see ParseUuid)
  std::string serial;              // may be empty
};

// Parses a canonical UUID ("xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", any case) into SMBIOS byte order;
// nullopt when it is not one.
std::optional<std::array<uint8_t, 16>> ParseUuid(const std::string& text);

// The entry point followed by the structure table, to be written at kSmbiosAddr.
std::vector<uint8_t> BuildSmbiosTables(const SmbiosInfo& info);

}  // namespace kvmts::vmm
