#!/usr/bin/env bash
# Session 29, call 8 (call 6's warm machine): the GPU mutant g10_target_terms_last_warp_lost (tests/mutants.txt)
# applied by hand to the device's copy of the tree, /tmp/build rebuilt, and the tests that could catch it run.
python3 - <<'PY'
p='stages/10_plan_per_batch/dense_backward.cu'
s=open(p).read(); f='for (int w = 0; w < kWarps; ++w) total += warp_sums[w][threadIdx.x];'
assert s.count(f)==1; open(p,'w').write(s.replace(f,'for (int w = 0; w + 1 < kWarps; ++w) total += warp_sums[w][threadIdx.x];'))
PY
T0=$SECONDS; timeout 100 ninja -C /tmp/build > /tmp/mut_build.log 2>&1; echo "build rc $? $((SECONDS-T0)) s"; cd /tmp/build && timeout $((128 - (SECONDS - T0))) ctest -R "PlanPerBatch\.(LongRunsOfOneTarget|BothPlansMatch)|stage10_plan_per_batch\.check" -j4 2>&1 | grep -E "Passed|Failed|tests passed" | cut -c1-110; echo "at $((SECONDS-T0)) s"
