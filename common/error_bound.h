// How far a stage's output may be from the double-precision reference: the
// bound the arithmetic allows, element by element, computed by the reference
// from the same inputs (docs/tolerances.md derives every term).
//
// With u = 2^-24 (fp32) and u_b = 2^-8 (bf16), for row i of E and row j of C:
//   a_i   = max_j Σ_k |E_ik C_jk|                  the dot products' absolute size
//   δz_i  = u·(2·D·a_i + 4·max_j |z_ij| + 12·s)    a logit in fp32, any order (2: tensor
//                                                  cores truncate), exp's scaling, softcap s's tanh
//   δLSE_i = δz_i + u·(2V + 4 ln V + 4|LSE_i| + 8) + 2^-21   the sum over V, exp and log
//   η_i   = δz_i + δLSE_i + 2^-20                  relative error of p_ij = exp(z_ij − LSE_i)
// and for the gradients, with S̃_ij = g_i (p_ij + [j = t_i]) ≥ |S_ij|, c'_ij = softcap'(z_ij):
//   |δdE_ik| ≤ Σ_j S̃_ij (κ_i^E |c'_ij| + σ_i) |C_jk| + u_out·|dE_ik|,
//   κ_i^E = u_S + 2V·u + η_i + 4u,   σ_i = 2 δz_i / s (softcap s; 0 without),
// u_S the rounding of S before its products (u_b in bf16) and u_out the
// output's; dC the same with Σ_i, |E_ik| and 2N·u. A stage that leaves out
// gradient terms on purpose (stage 07's filter, stage 08's dropped tiles)
// adds what it may leave out: see GradientApproximation.
#pragma once

namespace cce {

constexpr double kFp32Unit = 0x1p-24;  // fp32 round-to-nearest: relative error at most 2^-24
constexpr double kBf16Unit = 0x1p-8;   // bf16 (8 significant bits), rounded once, even toward zero

// What a stage's backward leaves out of the gradient on purpose. Terms
// S_ij = g_i·u_ij with |u_ij| = |p_ij − [j = t_i]|·softcap'(z_ij) below eps may
// be missing; with tail_corrected, the softmax mass of the missing ones is added
// back spread over their tile (stage 08: g_i M_iT C̄_T in dE, G_T/|T| in dC).
// The checks then allow, beyond the arithmetic,
//   dE_ik:  g_i Σ_{j: |u_ij| < eps⁺} |u_ij| |C_jk|  (+ g_i Σ_{j ≠ t_i: p_ij < eps⁺} p_ij · max_j |C_jk|, corrected)
//   dC_jk:  Σ_{i: |u_ij| < eps⁺} g_i |u_ij| |E_ik|  (+ Σ_{i: p_ij < eps⁺, j ≠ t_i} g_i eps⁺ |E_ik|, corrected)
// with eps⁺ = eps·exp(2η_i): the stage decides on values computed in fp32.
//
// scaled_rows_rounding: the gradient is S_ij = α_i·q_ij, q rounded as S would
// be and α_i = g_i·exp(R_i − LSE_i) made apart (one more exp, 2^-20 relative,
// in dE and dC); dC's product takes the rows α_i·E_i rounded to this unit
// (stage 10's bf16 chunks: kBf16Unit), and a target token's row may have its
// product part rounded before the target terms join it (one chunk, a row whose
// product part is at most a quarter of it); the check adds twice this unit to dC's κ.
struct GradientApproximation {
  double eps = 0.0;  // 0: the gradient is exact up to the arithmetic
  bool tail_corrected = false;
  double scaled_rows_rounding = 0.0;
};

}  // namespace cce
