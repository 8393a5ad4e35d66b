#include "common/npy.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "common/check.h"

namespace cce {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw InputError(path + ": " + why);
}

size_t descr_size(const std::string& descr) {
  if (descr == "<f4" || descr == "<i4") return 4;
  if (descr == "<f8" || descr == "<i8") return 8;
  return 0;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

template <typename T>
void write_npy_impl(const std::string& path, const char* descr, const T* data, const std::vector<int64_t>& shape) {
  std::string shape_str = "(";
  int64_t count = 1;
  for (int64_t s : shape) {
    shape_str += std::to_string(s) + ",";
    count *= s;
  }
  if (shape.size() > 1) shape_str.pop_back();  // (3,) for 1-D, (2,3) for 2-D, () for a scalar
  shape_str += ")";
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape_str + ", }";
  // Pad so that the data start on a 64-byte boundary; the header ends with '\n'.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) throw InputError(path + ": cannot open for writing");
  const char magic[] = "\x93NUMPY\x01\x00";
  out.write(magic, 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out.write(header.data(), header.size());
  out.write(reinterpret_cast<const char*>(data), count * sizeof(T));
  if (!out) throw InputError(path + ": write failed");
}

}  // namespace

int64_t NpyArray::element_count() const {
  int64_t count = 1;
  for (int64_t s : shape) count *= s;
  return count;
}

namespace {

// Reads and checks the header of `path`, and that the data it announces fit in the file;
// `in` is left at the start of the data. The returned array has no data yet.
NpyArray open_npy(const std::string& path, std::ifstream& in) {
  in.open(path, std::ios::binary);
  if (!in) fail(path, "cannot open (missing file?)");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail(path, "not a .npy file (bad magic)");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint16_t len16;
    if (!in.read(reinterpret_cast<char*>(&len16), 2)) fail(path, "truncated header");
    header_len = len16;
  } else if (magic[6] == 2 || magic[6] == 3) {
    if (!in.read(reinterpret_cast<char*>(&header_len), 4)) fail(path, "truncated header");
  } else {
    fail(path, "unsupported .npy version " + std::to_string(int(magic[6])));
  }
  if (header_len > (1u << 20)) fail(path, "header too long");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) fail(path, "truncated header");

  std::smatch m;
  NpyArray array;
  if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([^']*)')"))) fail(path, "header has no descr");
  array.dtype = m[1];
  if (descr_size(array.dtype) == 0)
    fail(path, "unsupported dtype '" + array.dtype + "' (expected <f4, <f8, <i4 or <i8, little-endian)");
  if (!std::regex_search(header, m, std::regex(R"('fortran_order'\s*:\s*(True|False))")))
    fail(path, "header has no fortran_order");
  if (m[1] == "True") fail(path, "Fortran-ordered arrays are not supported (save with np.ascontiguousarray)");
  if (!std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))"))) fail(path, "header has no shape");
  // Each dimension: digits only (no sign), no overflow, and a product that fits.
  std::string dims = m[1];
  std::regex item(R"(\s*([^,\s]+)\s*(,|$))");
  uint64_t count = 1;
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), item); it != std::sregex_iterator(); ++it) {
    const std::string text = (*it)[1];
    if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
      fail(path, "bad shape dimension '" + text + "' in header");
    const uint64_t dim = std::stoull(text);
    if (dim != 0 && count > (uint64_t{1} << 62) / dim) fail(path, "shape too large");
    count *= dim;
    array.shape.push_back(static_cast<int64_t>(dim));
  }
  // The data must fit in what is left of the file before anything is allocated.
  const std::streampos data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const uint64_t available = static_cast<uint64_t>(in.tellg() - data_start);
  in.seekg(data_start);
  if (count > available / descr_size(array.dtype))
    fail(path, "truncated data: shape " + shape_text(array.shape) + " needs " +
                   std::to_string(count * descr_size(array.dtype)) + " bytes, the file has " +
                   std::to_string(available));
  return array;
}

// The checks of an input directory's shapes: e [N,D], c [V,D], targets [N].
void check_input_shapes(const std::string& dir, const std::vector<int64_t>& e_shape,
                        const std::vector<int64_t>& c_shape, const std::vector<int64_t>& t_shape) {
  if (e_shape.size() != 2) throw InputError(dir + "/e.npy: expected shape [N,D], got " + shape_text(e_shape));
  if (c_shape.size() != 2) throw InputError(dir + "/c.npy: expected shape [V,D], got " + shape_text(c_shape));
  if (t_shape.size() != 1) throw InputError(dir + "/targets.npy: expected shape [N], got " + shape_text(t_shape));
  if (c_shape[1] != e_shape[1])
    throw InputError(dir + ": D differs between e.npy " + shape_text(e_shape) + " and c.npy " + shape_text(c_shape));
  if (t_shape[0] != e_shape[0])
    throw InputError(dir + ": N differs between e.npy " + shape_text(e_shape) + " and targets.npy " +
                     shape_text(t_shape));
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  std::ifstream in;
  NpyArray array = open_npy(path, in);
  size_t bytes = static_cast<size_t>(array.element_count()) * descr_size(array.dtype);
  array.data.resize(bytes);
  if (!in.read(array.data.data(), bytes))
    fail(path, "truncated data: expected " + std::to_string(bytes) + " bytes for shape " + shape_text(array.shape));
  return array;
}

NpyArray read_npy_header(const std::string& path) {
  std::ifstream in;
  return open_npy(path, in);
}

std::vector<float> read_npy_float32(const std::string& path, std::vector<int64_t>* shape) {
  NpyArray a = read_npy(path);
  std::vector<float> out(a.element_count());
  if (a.dtype == "<f4") {
    std::memcpy(out.data(), a.data.data(), out.size() * 4);
  } else if (a.dtype == "<f8") {
    const double* src = reinterpret_cast<const double*>(a.data.data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(src[i]);
  } else {
    fail(path, "expected a float32 array, found dtype " + a.dtype);
  }
  if (shape) *shape = a.shape;
  return out;
}

std::vector<int64_t> read_npy_targets(const std::string& path, std::vector<int64_t>* shape) {
  NpyArray a = read_npy(path);
  std::vector<int64_t> out(a.element_count());
  if (a.dtype == "<i8") {
    std::memcpy(out.data(), a.data.data(), out.size() * 8);
  } else if (a.dtype == "<i4") {
    const int32_t* src = reinterpret_cast<const int32_t*>(a.data.data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = src[i];
  } else {
    fail(path, "expected int64 or int32 targets, found dtype " + a.dtype);
  }
  if (shape) *shape = a.shape;
  return out;
}

void write_npy(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  write_npy_impl(path, "<f4", data, shape);
}

void write_npy(const std::string& path, const int64_t* data, const std::vector<int64_t>& shape) {
  write_npy_impl(path, "<i8", data, shape);
}

HostInputs load_inputs(const std::string& dir, Problem& problem) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw InputError("--load " + dir + ": not a directory");
  std::vector<int64_t> e_shape, c_shape, t_shape;
  HostInputs in;
  in.e = read_npy_float32((fs::path(dir) / "e.npy").string(), &e_shape);
  in.c = read_npy_float32((fs::path(dir) / "c.npy").string(), &c_shape);
  in.targets = read_npy_targets((fs::path(dir) / "targets.npy").string(), &t_shape);
  check_input_shapes(dir, e_shape, c_shape, t_shape);
  in.n = problem.n = e_shape[0];
  in.d = problem.d = e_shape[1];
  in.v = problem.v = c_shape[0];
  validate_inputs(problem, in);
  if (problem.dtype == Dtype::kBFloat16) {
    round_to_bf16(in.e);
    round_to_bf16(in.c);
  }
  return in;
}

void peek_inputs(const std::string& dir, int64_t* n, int64_t* d, int64_t* v) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw InputError(dir + ": not a directory");
  const NpyArray e = read_npy_header((fs::path(dir) / "e.npy").string());
  const NpyArray c = read_npy_header((fs::path(dir) / "c.npy").string());
  const NpyArray t = read_npy_header((fs::path(dir) / "targets.npy").string());
  check_input_shapes(dir, e.shape, c.shape, t.shape);
  *n = e.shape[0];
  *d = e.shape[1];
  *v = c.shape[0];
}

void save_inputs(const std::string& dir, const HostInputs& inputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw InputError("--save " + dir + ": cannot create directory: " + ec.message());
  write_npy((fs::path(dir) / "e.npy").string(), inputs.e.data(), {inputs.n, inputs.d});
  write_npy((fs::path(dir) / "c.npy").string(), inputs.c.data(), {inputs.v, inputs.d});
  write_npy((fs::path(dir) / "targets.npy").string(), inputs.targets.data(), {inputs.n});
}

}  // namespace cce
