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

  // Logits of the selected rows, in double; with bounds, also each row's
  // largest Σ_k |E_ik C_jk| (a_i of common/error_bound.h).
  MatrixD logits(R, V);
  Eigen::VectorXd abs_dot = Eigen::VectorXd::Zero(R);
  for (int64_t j0 = 0; j0 < V; j0 += kVocabBlock) {
    int64_t cols = std::min(kVocabBlock, V - j0);
    MatrixD cb = c_block(in, j0, cols);
    logits.middleCols(j0, cols).noalias() = e * cb.transpose();
    if (opt.bounds) abs_dot = abs_dot.cwiseMax((e.cwiseAbs() * cb.cwiseAbs().transpose()).rowwise().maxCoeff());
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

  // The forward's bounds (common/error_bound.h): δz_i, δLSE_i, and the loss's.
  const double u = kFp32Unit;
  std::vector<double> dz(R, 0.0);
  if (opt.bounds) {
    r.lse_bound.resize(R);
    r.loss_per_token_bound.resize(R);
    double sum_bound = 0.0, sum_abs = 0.0;
    for (int64_t k = 0; k < R; ++k) {
      dz[k] = u * (2.0 * D * abs_dot[k] + 4.0 * logits.row(k).cwiseAbs().maxCoeff() + 12.0 * s);
      r.lse_bound[k] = dz[k] + u * (2.0 * V + 4.0 * std::log(static_cast<double>(V)) + 4.0 * std::fabs(r.lse[k]) + 8.0) +
                       0x1p-21;
      const bool valid = in.targets[r.rows[k]] != p.ignore_index;
      r.loss_per_token_bound[k] = valid ? r.lse_bound[k] + dz[k] : 0.0;
      sum_bound += r.loss_per_token_bound[k];
      sum_abs += std::fabs(r.loss_per_token[k]);
    }
    // The sum over N in fp32 (any order), then one division for the mean.
    const double reduced = sum_bound + u * (p.n + 2.0) * sum_abs;
    r.loss_bound = p.reduction == Reduction::kMean ? (n_valid > 0 ? reduced / n_valid : 0.0) : reduced;
  }
  if (!opt.backward) return r;

  // Per row: g_i, and with bounds the factors of common/error_bound.h.
  const bool bf16 = p.dtype == Dtype::kBFloat16;
  const double rounding = bf16 ? kBf16Unit : u;  // of S before its products, and of the outputs
  r.output_rtol = opt.bounds ? rounding : 0.0;
  const double eps = opt.approximation.eps;
  const bool corrected = opt.approximation.tail_corrected && eps > 0.0;
  std::vector<double> g(R), kappa_e(R), kappa_c(R), sigma(R), eps_plus(R), corrected_mass(R, 0.0);
  for (int64_t k = 0; k < R; ++k) {
    const int64_t i = r.rows[k];
    g[k] = upstream_for_token(p, opt.upstream, n_valid, i, in.targets[i]);
    if (!opt.bounds) continue;
    const double eta = dz[k] + r.lse_bound[k] + 0x1p-20;
    // Scaled rows: α's own exp in both; in dC, α_i·E_i rounded and a target row's product part rounded before
    // its target terms join it.
    const double scaled = opt.approximation.scaled_rows_rounding;
    const double alpha_exp = scaled > 0.0 ? 0x1p-20 : 0.0;
    kappa_e[k] = rounding + 2.0 * V * u + eta + 4.0 * u + alpha_exp;
    kappa_c[k] = rounding + 2.0 * p.n * u + eta + 4.0 * u + alpha_exp + 2.0 * scaled;
    sigma[k] = p.has_softcap() ? 2.0 * dz[k] / s : 0.0;
    eps_plus[k] = eps * std::exp(2.0 * eta);
  }
  // Each column's largest |C_jk|: the most a tile's mean row can hold.
  Eigen::RowVectorXd c_abs_max = Eigen::RowVectorXd::Zero(D);
  if (corrected)
    for (int64_t j0 = 0; j0 < V; j0 += kVocabBlock)
      c_abs_max = c_abs_max.cwiseMax(c_block(in, j0, std::min(kVocabBlock, V - j0)).cwiseAbs().colwise().maxCoeff());

  // Block by block of the vocabulary: dlogit = g_i (softmax − onehot) ·
  // softcap'(logit) over the logits, and with bounds the weights W^E, W^C
  // whose products with |C| and |E| are dE's and dC's bounds.
  MatrixD de = MatrixD::Zero(R, D), de_bound;
  MatrixD dc, dc_bound;
  const MatrixD e_abs = opt.bounds ? MatrixD(e.cwiseAbs()) : MatrixD();
  if (opt.bounds) de_bound = MatrixD::Zero(R, D);
  if (r.all_rows) dc.resize(V, D);
  if (r.all_rows && opt.bounds) dc_bound.resize(V, D);
  for (int64_t j0 = 0; j0 < V; j0 += kVocabBlock) {
    const int64_t cols = std::min(kVocabBlock, V - j0);
    MatrixD w_e, w_c;
    if (opt.bounds) w_e = MatrixD::Zero(R, cols), w_c = MatrixD::Zero(R, cols);
    auto block = logits.middleCols(j0, cols);
    for (int64_t k = 0; k < R; ++k) {
      const int64_t t = in.targets[r.rows[k]];
      if (g[k] == 0.0) {
        block.row(k).setZero();
        continue;
      }
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t j = j0 + c;
        const double z = block(k, c), prob = std::exp(z - r.lse[k]), onehot = j == t ? 1.0 : 0.0;
        const double derivative = p.has_softcap() ? 1.0 - (z / s) * (z / s) : 1.0;  // d(s·tanh(x/s))/dx
        const double unscaled = (prob - onehot) * derivative;                     // u_ij
        block(k, c) = g[k] * unscaled;
        if (!opt.bounds) continue;
        const double largest = g[k] * (prob + onehot);  // S̃_ij
        const bool left_out = std::fabs(unscaled) < eps_plus[k];
        const double dropped = left_out ? g[k] * std::fabs(unscaled) : 0.0;
        w_e(k, c) = largest * (kappa_e[k] * std::fabs(derivative) + sigma[k]) + dropped;
        w_c(k, c) = largest * (kappa_c[k] * std::fabs(derivative) + sigma[k]) + dropped;
        if (corrected && j != t && prob < eps_plus[k]) {
          // The correction spreads what it adds (its M rounded once more, 2^-7).
          w_c(k, c) += g[k] * eps_plus[k] * (1.0 + 0x1p-7);
          corrected_mass[k] += prob;
        }
      }
    }
    const MatrixD cb = c_block(in, j0, cols);
    de.noalias() += block * cb;
    if (r.all_rows) dc.middleRows(j0, cols).noalias() = block.transpose() * e;
    if (!opt.bounds) continue;
    de_bound.noalias() += w_e * cb.cwiseAbs();
    if (r.all_rows) dc_bound.middleRows(j0, cols).noalias() = w_c.transpose() * e_abs;
  }
  if (corrected)
    for (int64_t k = 0; k < R; ++k) de_bound.row(k) += (g[k] * corrected_mass[k] * (1.0 + 0x1p-7)) * c_abs_max;
  r.de.assign(de.data(), de.data() + de.size());
  if (r.all_rows) r.dc.assign(dc.data(), dc.data() + dc.size());
  if (opt.bounds) {
    r.de_bound.assign(de_bound.data(), de_bound.data() + de_bound.size());
    if (r.all_rows) r.dc_bound.assign(dc_bound.data(), dc_bound.data() + dc_bound.size());
  }
  return r;
}

}  // namespace cce
