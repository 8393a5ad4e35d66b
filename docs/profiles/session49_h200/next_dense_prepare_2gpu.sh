#!/usr/bin/env bash
# For the next session with two H200 (main since session 49, one-GPU tests passed there: call 4): stage 11 with what a
# step allocates made on every GPU before any GPU's first collective (dense_prepare.patch: the step's scratch, the
# sample's scratch and the collectives' events in an on_every_gpu of their own; the page-locked read-backs made in
# the constructor; join_kept_pairs through page-locked memory). Run on a tree with the patch applied; main is a copy
# with it reversed (the code before session 49). Stage 11's two-GPU tests three times on each tree under ctest -j4 (call 5 of session 48 saw two
# of its dense cases hang there), then the hang counts.
T0=$SECONDS
R=$OUT/prepare; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
rm -rf /tmp/src-main; mkdir /tmp/src-main; tar cf - --exclude=.git . | tar xf - -C /tmp/src-main
(cd /tmp/src-main && git apply -R docs/profiles/session49_h200/dense_prepare.patch && cmake -S . -B /tmp/build-main $CM > /dev/null && ninja -C /tmp/build-main stage11_sharded_vocabulary stage10_plan_per_batch) > $R/build_main.log 2>&1 &
BM=$!
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build stage11_sharded_vocabulary stage10_plan_per_batch) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf prepare.tgz prepare; exit 1; }
wait $BM; echo "builds $((SECONDS-T0)) s: main $(tail -1 $R/build_main.log)"
for round in 1 2 3; do for tree in new main; do
  [ $((SECONDS-T0)) -gt 520 ] && continue
  B=/tmp/build; [ $tree = main ] && B=/tmp/build-main
  (cd $B && ctest -R "stage11_sharded_vocabulary\.(check|plan)_2gpu" -j4 --timeout 120) > $R/ctest_${tree}_$round.log 2>&1
  echo "$tree round $round rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_${tree}_$round.log) $(grep -E '\*\*\*Failed|Timeout' $R/ctest_${tree}_$round.log | sed 's/.*stage11_sharded_vocabulary.//; s/ .*//' | tr '\n' ' ')"
done; done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf prepare.tgz prepare
