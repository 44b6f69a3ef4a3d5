//===- Crc32c.h - CRC-32C and TFRecord's masked form ----------------------===//
//
// TFRecord files (TensorBoard's event files) guard each record's length and
// data with a masked CRC-32C (Castagnoli). Debian packages no C or C++
// CRC-32C library (only Python's), so it is computed here, table-driven.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_TENSORBOARD_CRC32C_H
#define HYPIPE_RUNTIME_TENSORBOARD_CRC32C_H

#include <cstddef>
#include <cstdint>

namespace hypipe::tensorboard {

/// CRC-32C of `size` bytes (reflected polynomial 0x82F63B78, initial and
/// final XOR 0xFFFFFFFF): crc32c("123456789") is 0xE3069283.
uint32_t crc32c(const void *data, size_t size);

/// TFRecord's mask of a CRC (tensorflow/core/lib/hash/crc32c.h): rotated
/// right by 15 bits plus 0xA282EAD8, so that a CRC of data holding CRCs
/// stays strong.
uint32_t maskedCrc32c(const void *data, size_t size);

} // namespace hypipe::tensorboard

#endif
