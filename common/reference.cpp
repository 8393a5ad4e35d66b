#include "common/reference.h"

#include <Eigen/Dense>
#include <cmath>

#include "common/check.h"

namespace cce {
namespace {

using MatrixD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// C is converted to double one block of vocabulary rows at a time, so that the
// reference never holds a double copy of a 256000-row classifier.
constexpr int64_t kVocabBlock = 4096;

MatrixD c_block(const HostInputs& in, int64_t j0, int64_t rows) {
  return Eigen::Map<const MatrixF>(in.c.data() + j0 * in.d, rows, in.d).cast<double>();
}

}  // namespace

double upstream_for_token(const Problem& p, const std::vector<float>& upstream, int64_t n_valid, int64_t i,
                          int64_t target) {
  if (target == p.ignore_index) return 0.0;
  switch (p.reduction) {
    case Reduction::kMean: return n_valid > 0 ? upstream.at(0) / static_cast<double>(n_valid) : 0.0;
    case Reduction::kSum: return upstream.at(0);
    case Reduction::kNone: return upstream.at(i);
  }
  return 0.0;
}

ReferenceResult reference_cross_entropy(const Problem& p, const HostInputs& in, const ReferenceOptions& opt) {
  validate_inputs(p, in);
  const size_t upstream_len = p.reduction == Reduction::kNone ? static_cast<size_t>(p.n) : 1;
  if (opt.backward && opt.upstream.size() != upstream_len)
    throw InputError("reference: upstream gradient must have " + std::to_string(upstream_len) + " values");

  ReferenceResult r;
  r.all_rows = opt.rows.empty();
  if (r.all_rows) {
    r.rows.resize(p.n);
    for (int64_t i = 0; i < p.n; ++i) r.rows[i] = i;
  } else {
    r.rows = opt.rows;
    for (int64_t i : r.rows)
      if (i < 0 || i >= p.n) throw InputError("reference: row " + std::to_string(i) + " out of range");
  }
  const int64_t R = static_cast<int64_t>(r.rows.size()), D = p.d, V = p.v;
  MatrixD e(R, D);
  for (int64_t k = 0; k < R; ++k)
    e.row(k) = Eigen::Map<const Eigen::RowVectorXf>(in.e.data() + r.rows[k] * D, D).cast<double>();

  // Logits of the selected rows, in double.
  MatrixD logits(R, V);
  for (int64_t j0 = 0; j0 < V; j0 += kVocabBlock) {
    int64_t cols = std::min(kVocabBlock, V - j0);
    logits.middleCols(j0, cols).noalias() = e * c_block(in, j0, cols).transpose();
  }
  const double s = p.softcap;
  if (p.has_softcap()) logits = (logits.array() / s).tanh() * s;

  r.lse.resize(R);
  r.loss_per_token.resize(R);
  for (int64_t k = 0; k < R; ++k) {
    double m = logits.row(k).maxCoeff();
    r.lse[k] = m + std::log((logits.row(k).array() - m).exp().sum());
    int64_t t = in.targets[r.rows[k]];
    r.loss_per_token[k] = t == p.ignore_index ? 0.0 : r.lse[k] - logits(k, t);
  }
  const int64_t n_valid = count_valid_targets(p, in.targets);
  if (r.all_rows) {
    double sum = 0.0;
    for (double l : r.loss_per_token) sum += l;
    r.loss = p.reduction == Reduction::kMean ? (n_valid > 0 ? sum / n_valid : 0.0) : sum;
  }
  if (!opt.backward) return r;

  // dlogit = g_i (softmax − onehot) · softcap'(logit), overwriting the logits.
  for (int64_t k = 0; k < R; ++k) {
    int64_t i = r.rows[k], t = in.targets[i];
    double g = upstream_for_token(p, opt.upstream, n_valid, i, t);
    auto row = logits.row(k).array();
    if (g == 0.0) {
      row.setZero();
      continue;
    }
    Eigen::ArrayXd softmax = (row - r.lse[k]).exp().transpose();
    Eigen::ArrayXd dz = softmax;
    dz(t) -= 1.0;
    if (p.has_softcap()) dz *= 1.0 - (row.transpose() / s).square();  // d(s·tanh(x/s))/dx = 1 − (z/s)²
    row = (g * dz).transpose();
  }
  MatrixD de = MatrixD::Zero(R, D);
  MatrixD dc;
  if (r.all_rows) dc.resize(V, D);
  for (int64_t j0 = 0; j0 < V; j0 += kVocabBlock) {
    int64_t cols = std::min(kVocabBlock, V - j0);
    MatrixD cb = c_block(in, j0, cols);
    de.noalias() += logits.middleCols(j0, cols) * cb;
    if (r.all_rows) dc.middleRows(j0, cols).noalias() = logits.middleCols(j0, cols).transpose() * e;
  }
  r.de.assign(de.data(), de.data() + de.size());
  if (r.all_rows) r.dc.assign(dc.data(), dc.data() + dc.size());
  return r;
}

}  // namespace cce
