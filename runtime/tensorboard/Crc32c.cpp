//===- Crc32c.cpp - CRC-32C and TFRecord's masked form --------------------===//

#include "runtime/tensorboard/Crc32c.h"

#include <array>

namespace hypipe::tensorboard {

namespace {

/// The byte-at-a-time table of the reflected Castagnoli polynomial.
std::array<uint32_t, 256> makeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0u);
    table[byte] = crc;
  }
  return table;
}

} // namespace

uint32_t crc32c(const void *data, size_t size) {
  static const std::array<uint32_t, 256> table = makeTable();
  const auto *bytes = static_cast<const unsigned char *>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i)
    crc = (crc >> 8) ^ table[(crc ^ bytes[i]) & 0xFF];
  return crc ^ 0xFFFFFFFFu;
}

uint32_t maskedCrc32c(const void *data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

} // namespace hypipe::tensorboard
