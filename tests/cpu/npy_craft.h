// Hand-made .npy files for the CPU tests: any descr, order, shape text and
// payload, including ones cce::write_npy would never produce (uint8, Fortran
// order, a version 2.0 header, a truncated payload).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace cce::testing {

// The bytes of a .npy file whose header dict is
//   {'descr': '<descr>', 'fortran_order': <fortran>, 'shape': <shape_text>, }
// padded with spaces to a multiple of 64 bytes and ended with '\n', as numpy
// writes it. version is 1 (2-byte header length) or 2 (4-byte header length).
inline std::string npy_bytes(const std::string& descr, bool fortran, const std::string& shape_text,
                             const std::string& payload, int version = 1) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                       ", 'shape': " + shape_text + ", }";
  const size_t prefix = version == 1 ? 10 : 12;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += static_cast<char>(version);
  bytes += '\0';
  const uint32_t len = static_cast<uint32_t>(header.size());
  bytes += static_cast<char>(len & 0xFF);
  bytes += static_cast<char>((len >> 8) & 0xFF);
  if (version != 1) {
    bytes += static_cast<char>((len >> 16) & 0xFF);
    bytes += static_cast<char>((len >> 24) & 0xFF);
  }
  return bytes + header + payload;
}

template <typename T>
std::string raw_bytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace cce::testing
