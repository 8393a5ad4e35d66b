// Writes the input directories the command-line tests load (see CMakeLists.txt):
//   <root>/good                 a valid N=7 D=5 V=13 problem
//   <root>/<case>               the same problem with one thing wrong
//   <root>/dloss_*              the good problem with a dloss.npy (the upstream gradient)
// Usage: cce_cpu_cli_fixtures <root>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "common/host_data.h"
#include "common/npy.h"
#include "common/upstream.h"
#include "tests/cpu/npy_craft.h"

namespace fs = std::filesystem;
using cce::testing::npy_bytes;
using cce::testing::raw_bytes;
using cce::testing::write_file;

namespace {

constexpr int64_t kN = 7, kD = 5, kV = 13;

cce::HostInputs good_inputs() {
  cce::Problem p;
  p.n = kN;
  p.d = kD;
  p.v = kV;
  p.dtype = cce::Dtype::kFloat32;
  cce::GeneratorOptions gen;
  gen.mode = cce::DataMode::kRandom;
  gen.seed = 7;
  return cce::generate_inputs(p, gen);
}

// A copy of the good directory, to spoil one file of.
fs::path good_copy(const fs::path& root, const std::string& name) {
  fs::path dir = root / name;
  cce::save_inputs(dir.string(), good_inputs());
  return dir;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output directory>\n", argv[0]);
    return 2;
  }
  try {
    const fs::path root = argv[1];
    fs::remove_all(root);
    const cce::HostInputs in = good_inputs();
    good_copy(root, "good");

    write_file((good_copy(root, "bad_magic") / "e.npy").string(), "this is not a numpy file at all\n");

    fs::remove(good_copy(root, "missing_targets") / "targets.npy");

    // c.npy announces [V,D] but holds 20 floats.
    std::vector<float> short_c(in.c.begin(), in.c.begin() + 20);
    write_file((good_copy(root, "truncated") / "c.npy").string(),
               npy_bytes("<f4", false, "(13, 5)", raw_bytes(short_c)));

    write_file((good_copy(root, "uint8") / "e.npy").string(),
               npy_bytes("|u1", false, "(7, 5)", std::string(kN * kD, '\x01')));

    write_file((good_copy(root, "fortran") / "e.npy").string(), npy_bytes("<f4", true, "(7, 5)", raw_bytes(in.e)));

    std::vector<float> float_targets(in.targets.begin(), in.targets.end());
    write_file((good_copy(root, "float_targets") / "targets.npy").string(),
               npy_bytes("<f4", false, "(7,)", raw_bytes(float_targets)));

    std::vector<int64_t> six_targets(in.targets.begin(), in.targets.begin() + 6);
    cce::write_npy((good_copy(root, "mismatched_n") / "targets.npy").string(), six_targets.data(), {6});

    std::vector<float> c_d4(kV * 4, 0.5f);
    cce::write_npy((good_copy(root, "mismatched_d") / "c.npy").string(), c_d4.data(), {kV, 4});

    cce::write_npy((good_copy(root, "e_3d") / "e.npy").string(), in.e.data(), {kN, kD, 1});

    // Shapes no array can have: a negative dimension, a product of
    // dimensions beyond int64 (2^32 x 2^32), and 10^12 targets in a 56-byte
    // payload (the reader must refuse each before allocating anything).
    write_file((good_copy(root, "negative_dimension") / "e.npy").string(),
               npy_bytes("<f4", false, "(-7, 5)", raw_bytes(in.e)));
    write_file((good_copy(root, "shape_overflows_int64") / "c.npy").string(),
               npy_bytes("<f4", false, "(4294967296, 4294967296)", raw_bytes(in.c)));
    write_file((good_copy(root, "huge_dimension") / "targets.npy").string(),
               npy_bytes("<i8", false, "(1000000000000,)", raw_bytes(in.targets)));

    std::vector<int64_t> bad_targets = in.targets;
    bad_targets[4] = kV;
    cce::write_npy((good_copy(root, "target_out_of_range") / "targets.npy").string(), bad_targets.data(), {kN});

    // dloss.npy: a good per-token one (for --reduction none), and one wrong
    // length, dtype or value each.
    cce::Problem none;
    none.n = kN;
    none.reduction = cce::Reduction::kNone;
    const std::vector<float> ones(kN, 1.0f);
    cce::write_upstream((good_copy(root, "dloss_ones_none") / "dloss.npy").string(), none, ones);
    const std::vector<float> six(kN - 1, 1.0f);
    cce::write_npy((good_copy(root, "dloss_wrong_length") / "dloss.npy").string(), six.data(), {kN - 1});
    const std::vector<double> ones64(kN, 1.0);
    write_file((good_copy(root, "dloss_float64") / "dloss.npy").string(),
               npy_bytes("<f8", false, "(7,)", raw_bytes(ones64)));
    std::vector<float> with_nan = ones;
    with_nan[2] = std::numeric_limits<float>::quiet_NaN();
    cce::write_npy((good_copy(root, "dloss_nan") / "dloss.npy").string(), with_nan.data(), {kN});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cce_cpu_cli_fixtures: %s\n", e.what());
    return 1;
  }
  return 0;
}
