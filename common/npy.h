// Reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0,
// C order, little-endian), so that a stage can run on tensors saved from PyTorch
// with np.save(t.float().cpu().numpy()).
//
// Input directory:  e.npy (float32 [N,D]), c.npy (float32 [V,D]),
//                   targets.npy (int64 or int32 [N]).
// Output directory: loss.npy (float32 scalar, or [N] for reduction none),
//                   lse.npy (float32 [N]), de.npy (float32 [N,D]), dc.npy (float32 [V,D]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/host_data.h"
#include "common/problem.h"

namespace cce {

struct NpyArray {
  std::string dtype;  // numpy descr, e.g. "<f4", "<i8"
  std::vector<int64_t> shape;
  std::vector<char> data;
  int64_t element_count() const;
};

// Throws InputError naming the file on a missing, truncated or malformed file.
NpyArray read_npy(const std::string& path);
// The dtype and shape only (data left empty), with the same checks as read_npy,
// the length of the data included.
NpyArray read_npy_header(const std::string& path);
std::vector<float> read_npy_float32(const std::string& path, std::vector<int64_t>* shape);
std::vector<int64_t> read_npy_targets(const std::string& path, std::vector<int64_t>* shape);  // int64 or int32

void write_npy(const std::string& path, const float* data, const std::vector<int64_t>& shape);
void write_npy(const std::string& path, const int64_t* data, const std::vector<int64_t>& shape);

// Loads e.npy, c.npy and targets.npy from `dir`, fills N, D and V of `problem`
// from their shapes (after checking that they agree) and rounds E and C to bf16
// when problem.dtype is bf16.
HostInputs load_inputs(const std::string& dir, Problem& problem);
// N, D and V of the inputs in `dir` from the headers of its three files, with the
// shape checks of load_inputs; the data is not read (nor are the targets' values checked).
void peek_inputs(const std::string& dir, int64_t* n, int64_t* d, int64_t* v);
void save_inputs(const std::string& dir, const HostInputs& inputs);

}  // namespace cce
