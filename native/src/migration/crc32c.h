// CRC-32C (Castagnoli), the per-frame integrity check of the migration stream. Uses the SSE4.2 crc32 instruction
// when the CPU has it (several GiB/s, far above the link) and a table otherwise; both give identical results.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvmts::migration {

/** Extends `crc` (start with 0) over `len` bytes. Crc32c(Crc32c(0,a),b) == Crc32c(0, a||b). */
uint32_t Crc32c(uint32_t crc, const void* data, size_t len);

/** The table implementation, exposed so tests can check the hardware path against it. */
uint32_t Crc32cPortable(uint32_t crc, const void* data, size_t len);

}  // namespace kvmts::migration
