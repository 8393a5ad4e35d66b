// The .npy reader and writer, and the input directories (common/npy.h).
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/cpu/temp_dir.h"
#include "common/check.h"
#include "common/host_data.h"
#include "common/npy.h"
#include "tests/cpu/npy_craft.h"

namespace cce {
namespace {

namespace fs = std::filesystem;
using testing::npy_bytes;
using testing::raw_bytes;
using testing::read_file;
using testing::write_file;

// Temp directories named after this test file.
class TempDir : public testing::TempDir {
 public:
  TempDir() : testing::TempDir("cce_test_npy") {}
};

std::vector<float> random_floats(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> out(count);
  for (float& x : out) x = normal(rng);
  return out;
}

// Runs `body`, expecting an InputError whose message contains every one of `parts`.
void expect_input_error(const std::function<void()>& body, const std::vector<std::string>& parts) {
  try {
    body();
    ADD_FAILURE() << "no InputError (expected one mentioning '" << parts.at(0) << "')";
  } catch (const InputError& e) {
    const std::string what = e.what();
    for (const auto& part : parts)
      EXPECT_NE(what.find(part), std::string::npos) << "message '" << what << "' lacks '" << part << "'";
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got another exception: " << e.what();
  }
}

Problem fp32_problem() {
  Problem p;
  p.dtype = Dtype::kFloat32;
  return p;
}

HostInputs small_inputs(uint64_t seed) {
  HostInputs in;
  in.n = 7;
  in.d = 5;
  in.v = 13;
  in.e = random_floats(35, seed);
  in.c = random_floats(65, seed + 1);
  in.targets = {0, 12, 5, -100, 7, 12, 1};
  return in;
}

// --- read/write round trips ------------------------------------------------------

TEST(Npy, Float32MatrixRoundTrip) {
  TempDir dir;
  std::vector<float> values = random_floats(7 * 5, 1);
  values[3] = -0.0f;
  values[4] = std::numeric_limits<float>::infinity();
  values[5] = std::numeric_limits<float>::denorm_min();
  write_npy(dir.file("a.npy"), values.data(), {7, 5});
  NpyArray a = read_npy(dir.file("a.npy"));
  EXPECT_EQ(a.dtype, "<f4");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{7, 5}));
  EXPECT_EQ(a.element_count(), 35);
  ASSERT_EQ(a.data.size(), 35u * 4u);
  EXPECT_EQ(std::string(a.data.begin(), a.data.end()), raw_bytes(values));  // bit-exact
  std::vector<int64_t> shape;
  EXPECT_EQ(read_npy_float32(dir.file("a.npy"), &shape), values);
  EXPECT_EQ(shape, (std::vector<int64_t>{7, 5}));
  EXPECT_EQ(read_npy_float32(dir.file("a.npy"), nullptr).size(), 35u);  // shape is optional
}

TEST(Npy, Int64RoundTrip) {
  TempDir dir;
  std::vector<int64_t> values = {0, 1, -100, 1128, int64_t{1} << 40, std::numeric_limits<int64_t>::min(),
                                 std::numeric_limits<int64_t>::max(), 7, 12, -1, 3, 5, 9};
  write_npy(dir.file("t.npy"), values.data(), {13});
  NpyArray a = read_npy(dir.file("t.npy"));
  EXPECT_EQ(a.dtype, "<i8");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{13}));
  std::vector<int64_t> shape;
  EXPECT_EQ(read_npy_targets(dir.file("t.npy"), &shape), values);
  EXPECT_EQ(shape, (std::vector<int64_t>{13}));
}

TEST(Npy, ScalarRoundTrip) {
  TempDir dir;
  const float x = 2.718281828f;
  write_npy(dir.file("s.npy"), &x, {});
  NpyArray a = read_npy(dir.file("s.npy"));
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(a.element_count(), 1);
  std::vector<int64_t> shape = {99};
  std::vector<float> back = read_npy_float32(dir.file("s.npy"), &shape);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0], x);
  EXPECT_TRUE(shape.empty());
}

TEST(Npy, HeaderIsWhatNumpyExpects) {
  // numpy parses the header as a Python dict literal: a 1-D shape needs its
  // trailing comma, and the data start on a 64-byte boundary after a '\n'.
  TempDir dir;
  std::vector<float> v(13, 1.0f);
  write_npy(dir.file("v.npy"), v.data(), {13});
  write_npy(dir.file("m.npy"), v.data(), {1, 13});
  write_npy(dir.file("s.npy"), v.data(), {});
  for (const char* name : {"v.npy", "m.npy", "s.npy"}) {
    SCOPED_TRACE(name);
    const std::string bytes = read_file(dir.file(name));
    ASSERT_GE(bytes.size(), 10u);
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
    const size_t header_len = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    const size_t data_start = 10 + header_len;
    EXPECT_EQ(data_start % 64, 0u);
    ASSERT_LE(data_start, bytes.size());
    EXPECT_EQ(bytes[data_start - 1], '\n');
    const std::string header = bytes.substr(10, header_len);
    EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos) << header;
    EXPECT_NE(header.find("'fortran_order': False"), std::string::npos) << header;
    const std::string shape = std::string(name) == "v.npy"   ? "(13,)"
                              : std::string(name) == "m.npy" ? "(1,13)"
                                                             : "()";
    std::string compact;
    for (char ch : header) if (ch != ' ') compact += ch;
    EXPECT_NE(compact.find("'shape':" + shape), std::string::npos) << header;
    const size_t elements = std::string(name) == "s.npy" ? 1 : 13;
    EXPECT_EQ(bytes.size(), data_start + elements * 4) << "payload size";
  }
}

TEST(Npy, ReadsWhatNumpyWrites) {
  TempDir dir;
  // int32 targets (np.int32), the way numpy spaces its header.
  std::vector<int32_t> t32 = {0, 12, -100, 5, 7};
  write_file(dir.file("t32.npy"), npy_bytes("<i4", false, "(5,)", raw_bytes(t32)));
  std::vector<int64_t> shape;
  EXPECT_EQ(read_npy_targets(dir.file("t32.npy"), &shape), (std::vector<int64_t>{0, 12, -100, 5, 7}));
  EXPECT_EQ(shape, (std::vector<int64_t>{5}));
  // float64 is converted to float32.
  std::vector<double> f64 = {0.5, -1.25, 1e10, 3.0, 1.0 / 3.0, -0.0};
  write_file(dir.file("f64.npy"), npy_bytes("<f8", false, "(2, 3)", raw_bytes(f64)));
  std::vector<float> f = read_npy_float32(dir.file("f64.npy"), &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(f.size(), 6u);
  for (size_t i = 0; i < f.size(); ++i) EXPECT_EQ(f[i], static_cast<float>(f64[i]));
  // Format version 2.0 (4-byte header length).
  std::vector<float> f32 = random_floats(12, 5);
  write_file(dir.file("v2.npy"), npy_bytes("<f4", false, "(4, 3)", raw_bytes(f32), 2));
  EXPECT_EQ(read_npy_float32(dir.file("v2.npy"), &shape), f32);
  EXPECT_EQ(shape, (std::vector<int64_t>{4, 3}));
  // Only the announced shape is read: bytes after it are ignored (as np.load does).
  write_file(dir.file("long.npy"), npy_bytes("<f4", false, "(2,)", raw_bytes(f32)));
  EXPECT_EQ(read_npy_float32(dir.file("long.npy"), &shape).size(), 2u);
}

// --- malformed files ----------------------------------------------------------

TEST(Npy, MissingFile) {
  TempDir dir;
  const std::string path = dir.file("nothing_here.npy");
  expect_input_error([&] { read_npy(path); }, {path});
  expect_input_error([&] { read_npy_float32(path, nullptr); }, {path});
  expect_input_error([&] { read_npy_targets(path, nullptr); }, {path});
}

TEST(Npy, BadMagic) {
  TempDir dir;
  write_file(dir.file("text.npy"), "this is not numpy\n");
  expect_input_error([&] { read_npy(dir.file("text.npy")); }, {dir.file("text.npy"), "magic"});
  write_file(dir.file("short.npy"), "\x93NU");
  expect_input_error([&] { read_npy(dir.file("short.npy")); }, {dir.file("short.npy")});
  write_file(dir.file("empty.npy"), "");
  expect_input_error([&] { read_npy(dir.file("empty.npy")); }, {dir.file("empty.npy")});
  std::string v9 = npy_bytes("<f4", false, "(1,)", raw_bytes(std::vector<float>{1.0f}));
  v9[6] = 9;
  write_file(dir.file("v9.npy"), v9);
  expect_input_error([&] { read_npy(dir.file("v9.npy")); }, {dir.file("v9.npy"), "version"});
}

TEST(Npy, Truncated) {
  TempDir dir;
  std::vector<float> values = random_floats(35, 2);
  // Header says [7,5], the payload holds 34 floats.
  std::string bytes = npy_bytes("<f4", false, "(7, 5)", raw_bytes(values));
  write_file(dir.file("data.npy"), bytes.substr(0, bytes.size() - 4));
  expect_input_error([&] { read_npy(dir.file("data.npy")); }, {dir.file("data.npy"), "truncated"});
  // The file ends inside the header.
  write_file(dir.file("header.npy"), bytes.substr(0, 30));
  expect_input_error([&] { read_npy(dir.file("header.npy")); }, {dir.file("header.npy"), "truncated"});
  // A header with no data at all.
  write_file(dir.file("nodata.npy"), npy_bytes("<i8", false, "(3,)", ""));
  expect_input_error([&] { read_npy_targets(dir.file("nodata.npy"), nullptr); }, {dir.file("nodata.npy")});
}

// Shapes no array can have are refused from the header alone, by read_npy and
// read_npy_header both, each with its own reason: a negative dimension (not
// its absolute value), a dimension beyond int64 (not std::out_of_range), a
// product of dimensions beyond int64 (not wrapped to a small or empty array),
// and a dimension far larger than the file (not a bad_alloc).
TEST(Npy, ImpossibleShapes) {
  TempDir dir;
  const std::string payload = raw_bytes(random_floats(35, 4));
  struct Case {
    const char* name;
    const char* shape;
    std::vector<std::string> message;
  };
  const Case cases[] = {
      {"negative", "(-7, 5)", {"bad shape dimension '-7' in header"}},
      {"beyond_int64", "(99999999999999999999,)", {"bad shape dimension '99999999999999999999' in header"}},
      // 2^32 * 2^32 = 2^64: wraps to 0 in 64-bit arithmetic.
      {"product_overflows", "(4294967296, 4294967296)", {"shape too large"}},
      {"product_overflows_int64_only", "(3037000500, 3037000500)", {"shape too large"}},  // 9.2234e18 > 2^63-1
      // 10^12 floats announced, 140 bytes present.
      {"huge", "(1000000000000,)", {"truncated data", "shape [1000000000000] needs 4000000000000 bytes",
                                    "the file has 140"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.file(std::string(c.name) + ".npy");
    write_file(path, npy_bytes("<f4", false, c.shape, payload));
    std::vector<std::string> parts = {path + ": "};
    parts.insert(parts.end(), c.message.begin(), c.message.end());
    expect_input_error([&] { read_npy(path); }, parts);
    expect_input_error([&] { read_npy_header(path); }, parts);
    expect_input_error([&] { read_npy_float32(path, nullptr); }, parts);
  }
}

// A version-2 header may announce up to 4 GiB of header text: more than 1 MiB
// is refused before anything is allocated or read.
TEST(Npy, HeaderLongerThanOneMiBIsRefused) {
  TempDir dir;
  std::string bytes = npy_bytes("<f4", false, "(2,)", raw_bytes(random_floats(2, 1)), 2);
  const uint32_t announced = (1u << 20) + 64;
  for (int b = 0; b < 4; ++b) bytes[8 + b] = static_cast<char>((announced >> (8 * b)) & 0xFF);
  const std::string path = dir.file("long_header.npy");
  write_file(path, bytes);
  expect_input_error([&] { read_npy(path); }, {path + ": ", "header too long"});
  expect_input_error([&] { read_npy_header(path); }, {path + ": ", "header too long"});
}

TEST(Npy, UnsupportedDtypes) {
  TempDir dir;
  const std::string two_bytes(2 * 3 * 2, '\0');
  struct Case {
    const char* descr;
    std::string payload;
  };
  for (const Case& c : {Case{"<f2", two_bytes}, Case{"|u1", std::string(6, '\x07')}, Case{">f4", std::string(24, '\0')},
                        Case{"<c8", std::string(48, '\0')}, Case{"|b1", std::string(6, '\x01')}}) {
    SCOPED_TRACE(c.descr);
    write_file(dir.file("x.npy"), npy_bytes(c.descr, false, "(2, 3)", c.payload));
    expect_input_error([&] { read_npy(dir.file("x.npy")); }, {dir.file("x.npy"), "dtype", c.descr});
  }
  // Supported dtypes in the wrong role.
  std::vector<int64_t> ints = {1, 2, 3};
  write_npy(dir.file("ints.npy"), ints.data(), {3});
  expect_input_error([&] { read_npy_float32(dir.file("ints.npy"), nullptr); }, {dir.file("ints.npy"), "<i8"});
  std::vector<float> floats = {1.0f, 2.0f, 3.0f};
  write_npy(dir.file("floats.npy"), floats.data(), {3});
  expect_input_error([&] { read_npy_targets(dir.file("floats.npy"), nullptr); }, {dir.file("floats.npy"), "<f4"});
}

TEST(Npy, FortranOrderAndBrokenHeaders) {
  TempDir dir;
  std::vector<float> values = random_floats(6, 3);
  write_file(dir.file("f.npy"), npy_bytes("<f4", true, "(2, 3)", raw_bytes(values)));
  expect_input_error([&] { read_npy(dir.file("f.npy")); }, {dir.file("f.npy"), "Fortran"});
  // Headers missing a key.
  auto with_header = [&](const std::string& name, const std::string& dict) {
    std::string header = dict;
    header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
    header += '\n';
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
    bytes += static_cast<char>(header.size() & 0xFF);
    bytes += static_cast<char>(header.size() >> 8);
    write_file(dir.file(name), bytes + header + raw_bytes(values));
    return dir.file(name);
  };
  std::string path = with_header("nodescr.npy", "{'fortran_order': False, 'shape': (6,), }");
  expect_input_error([&] { read_npy(path); }, {path, "descr"});
  path = with_header("noorder.npy", "{'descr': '<f4', 'shape': (6,), }");
  expect_input_error([&] { read_npy(path); }, {path, "fortran_order"});
  path = with_header("noshape.npy", "{'descr': '<f4', 'fortran_order': False, }");
  expect_input_error([&] { read_npy(path); }, {path, "shape"});
}

// --- input directories ------------------------------------------------------------

TEST(InputDir, SaveLoadRoundTrip) {
  TempDir dir;
  HostInputs in = small_inputs(10);
  const std::string sub = (dir.path() / "nested" / "inputs").string();  // created on save
  save_inputs(sub, in);
  EXPECT_TRUE(fs::exists(fs::path(sub) / "e.npy"));
  EXPECT_TRUE(fs::exists(fs::path(sub) / "c.npy"));
  EXPECT_TRUE(fs::exists(fs::path(sub) / "targets.npy"));
  Problem p = fp32_problem();
  p.n = 1;  // overwritten from the files
  HostInputs back = load_inputs(sub, p);
  EXPECT_EQ(p.n, 7);
  EXPECT_EQ(p.d, 5);
  EXPECT_EQ(p.v, 13);
  EXPECT_EQ(back.n, 7);
  EXPECT_EQ(back.d, 5);
  EXPECT_EQ(back.v, 13);
  EXPECT_EQ(back.e, in.e);
  EXPECT_EQ(back.c, in.c);
  EXPECT_EQ(back.targets, in.targets);
}

TEST(InputDir, Bf16LoadRoundsValues) {
  TempDir dir;
  HostInputs in = small_inputs(20);
  save_inputs(dir.path().string(), in);
  Problem p;
  p.dtype = Dtype::kBFloat16;
  HostInputs back = load_inputs(dir.path().string(), p);
  std::vector<float> e = in.e, c = in.c;
  round_to_bf16(e);
  round_to_bf16(c);
  EXPECT_EQ(back.e, e);
  EXPECT_EQ(back.c, c);
  EXPECT_NE(back.e, in.e) << "random fp32 values are not all bf16 values";
  EXPECT_EQ(back.targets, in.targets);
}

TEST(InputDir, Int32Targets) {
  TempDir dir;
  HostInputs in = small_inputs(30);
  save_inputs(dir.path().string(), in);
  std::vector<int32_t> t32(in.targets.begin(), in.targets.end());
  write_file(dir.file("targets.npy"), npy_bytes("<i4", false, "(7,)", raw_bytes(t32)));
  Problem p = fp32_problem();
  EXPECT_EQ(load_inputs(dir.path().string(), p).targets, in.targets);
}

// Writes the good small_inputs into a fresh directory, lets `spoil` change it,
// and expects load_inputs to fail with a message containing `parts`.
void expect_load_error(const std::function<void(const TempDir&)>& spoil, const std::vector<std::string>& parts,
                       Problem p = fp32_problem()) {
  TempDir dir;
  save_inputs(dir.path().string(), small_inputs(40));
  spoil(dir);
  expect_input_error([&] { load_inputs(dir.path().string(), p); }, parts);
}

TEST(InputDir, MalformedDirectories) {
  {
    TempDir dir;
    Problem p = fp32_problem();
    const std::string missing = (dir.path() / "does_not_exist").string();
    expect_input_error([&] { load_inputs(missing, p); }, {missing, "not a directory"});
    write_file(dir.file("plain_file"), "x");
    expect_input_error([&] { load_inputs(dir.file("plain_file"), p); }, {"not a directory"});
  }
  {
    SCOPED_TRACE("missing c.npy");
    expect_load_error([](const TempDir& d) { fs::remove(d.file("c.npy")); }, {"c.npy"});
  }
  {
    SCOPED_TRACE("bad magic in targets.npy");
    expect_load_error([](const TempDir& d) { write_file(d.file("targets.npy"), "garbage garbage"); },
                      {"targets.npy", "magic"});
  }
  {
    SCOPED_TRACE("mismatched N");
    expect_load_error(
        [](const TempDir& d) {
          std::vector<int64_t> t = {0, 1, 2, 3, 4, 5};
          write_npy(d.file("targets.npy"), t.data(), {6});
        },
        {"N differs", "[7,5]", "[6]"});
  }
  {
    SCOPED_TRACE("mismatched D");
    expect_load_error(
        [](const TempDir& d) {
          std::vector<float> c(13 * 4, 0.25f);
          write_npy(d.file("c.npy"), c.data(), {13, 4});
        },
        {"D differs", "[7,5]", "[13,4]"});
  }
  {
    SCOPED_TRACE("3-D e.npy");
    expect_load_error(
        [](const TempDir& d) {
          std::vector<float> e(7 * 5, 0.5f);
          write_npy(d.file("e.npy"), e.data(), {7, 5, 1});
        },
        {"e.npy", "[7,5,1]"});
  }
  {
    SCOPED_TRACE("1-D c.npy");
    expect_load_error(
        [](const TempDir& d) {
          std::vector<float> c(65, 0.5f);
          write_npy(d.file("c.npy"), c.data(), {65});
        },
        {"c.npy", "[65]"});
  }
  {
    SCOPED_TRACE("2-D targets.npy");
    expect_load_error(
        [](const TempDir& d) {
          std::vector<int64_t> t(7, 1);
          write_npy(d.file("targets.npy"), t.data(), {7, 1});
        },
        {"targets.npy", "[7,1]"});
  }
  {
    SCOPED_TRACE("target out of range");
    expect_load_error(
        [](const TempDir& d) {
          std::vector<int64_t> t = {0, 1, 2, 13, 4, 5, 6};
          write_npy(d.file("targets.npy"), t.data(), {7});
        },
        {"target 13", "position 3"});
  }
  {
    SCOPED_TRACE("-100 with another ignore index");
    Problem p = fp32_problem();
    p.ignore_index = -1;
    expect_load_error([](const TempDir&) {}, {"target -100", "position 3"}, p);
  }
  {
    SCOPED_TRACE("zero tokens");
    expect_load_error(
        [](const TempDir& d) {
          std::vector<float> e;
          std::vector<int64_t> t;
          write_npy(d.file("e.npy"), e.data(), {0, 5});
          write_npy(d.file("targets.npy"), t.data(), {0});
        },
        {"must be positive"});
  }
  {
    SCOPED_TRACE("uint8 e.npy");
    expect_load_error(
        [](const TempDir& d) { write_file(d.file("e.npy"), npy_bytes("|u1", false, "(7, 5)", std::string(35, '\1'))); },
        {"e.npy", "|u1"});
  }
  {
    SCOPED_TRACE("float targets");
    expect_load_error(
        [](const TempDir& d) {
          std::vector<float> t(7, 1.0f);
          write_npy(d.file("targets.npy"), t.data(), {7});
        },
        {"targets.npy", "<f4"});
  }
}

TEST(InputDir, PeekReadsTheHeadersOnly) {
  TempDir dir;
  save_inputs(dir.path().string(), small_inputs(60));
  int64_t n = 0, d = 0, v = 0;
  peek_inputs(dir.path().string(), &n, &d, &v);
  EXPECT_EQ(n, 7);
  EXPECT_EQ(d, 5);
  EXPECT_EQ(v, 13);
  const NpyArray header = read_npy_header(dir.file("c.npy"));
  EXPECT_EQ(header.dtype, "<f4");
  EXPECT_EQ(header.shape, (std::vector<int64_t>{13, 5}));
  EXPECT_TRUE(header.data.empty());
  // The same checks as load_inputs on shapes and on the data's length.
  std::vector<int64_t> t = {0, 1, 2, 3, 4, 5};
  write_npy(dir.file("targets.npy"), t.data(), {6});
  expect_input_error([&] { peek_inputs(dir.path().string(), &n, &d, &v); }, {"N differs", "[7,5]", "[6]"});
  std::vector<float> values = random_floats(35, 3);
  const std::string bytes = npy_bytes("<f4", false, "(7, 5)", raw_bytes(values));
  write_file(dir.file("e.npy"), bytes.substr(0, bytes.size() - 4));
  expect_input_error([&] { peek_inputs(dir.path().string(), &n, &d, &v); }, {"e.npy", "truncated"});
  const std::string missing = (dir.path() / "nothing_here").string();
  expect_input_error([&] { peek_inputs(missing, &n, &d, &v); }, {missing, "not a directory"});
}

TEST(InputDir, SaveToUnusablePathFails) {
  TempDir dir;
  write_file(dir.file("a_file"), "x");
  // A directory cannot be created under a regular file.
  EXPECT_THROW(save_inputs((dir.path() / "a_file" / "sub").string(), small_inputs(50)), InputError);
}

}  // namespace
}  // namespace cce
