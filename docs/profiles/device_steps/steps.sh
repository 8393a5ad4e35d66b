#!/usr/bin/env bash
# Steps that session scripts on the device machine repeat (source it from the repository root; $R is the script's
# log folder, T0 its start in $SECONDS). Scripts of sessions up to 57 spell these out; later ones call them.
#
#   call_start NAME             $R = $OUT/NAME made, and status.txt in it (CCE_COMMIT, the tree's git state, the GPUs)
#   train_lm_models             lm32k's and lm128k's models trained into /tmp/cce-lm-data in the background
#                               (bench/lm_data.py, about 270 s side by side); `wait` for them
#   tree_without DIR PATCH...   DIR: a copy of the working tree with each PATCH reversed in turn (main's tree, or
#                               an earlier commit's, beside a branch)
#   build DIR SRC TARGETS...    cmake + ninja of TARGETS (all when none) from SRC into DIR, Release, sm_90
#   tree_with_edit DIR FILE SED  DIR: a copy of the working tree with sed expression SED applied to FILE; returns 1
#                               when FILE is unchanged
#   builds_side_by_side "TARGETS" NAME=SRC...
#                               build DIR SRC TARGETS for each tree at once, DIR /tmp/build for SRC "." and
#                               /tmp/build-NAME for the others; logs build_NAME.log, one "NAME build rc" line each
#   branch_and_main_builds PATCH TARGETS...
#                               the working tree (a branch) built whole in /tmp/build and, beside it, main's tree
#                               (tree_without /tmp/main-tree PATCH) in /tmp/build-main (TARGETS only); logs
#                               build.log, build_main.log; returns 1, the errors printed, when the branch does not build
#   stage10_rounds ROUNDS SHAPES TREE=BUILD...
#                               cce_bench's stage 10 (loss + grad) of each tree in turns, ROUNDS rounds, the floor
#                               in round 1; files bench_<tree>_<round>.{json,txt} in $R; one summary line per case
#   stage10_sanitizers BUILD    compute-sanitizer memcheck and racecheck on stage 10 with --check at 300 × 200 × 20001
#                               (the sparse plan, grouped rows): sanitizer_<tool>.txt, one summary line each
#   plan_kernel_times REGEX TREE=BUILD...
#                               ncu's duration of stage 10's kernels matching REGEX (clocks left alone, one kernel at
#                               a time) at lm32k's and gemma2's shapes on generated data, per tree: ncu_<shape>_<tree>.txt,
#                               summed per kernel by ncu_durations.py
#   mass_kernel_memory TREE=BUILD...
#                               ncu's memory counters of stage 10's first misplaced_mass_kernel at gemma2's shape per
#                               tree (global load sectors per request, L2 hit rate, DRAM bytes): ncu_mass_<tree>.txt
#   dense_kept_kernels TREE=BUILD...
#                               ncu's duration of stage 10's three kept-tile kernels per tree at llama3's shape with
#                               every pair kept (random data, the sparse plan), summed over the call's chunks, and
#                               their TFLOP/s (session61_h200/kept_tflops.py): ncu_llama3_flat_<tree>.txt
#   gpu_suite UNTIL             the whole GPU suite (ctest -L "gpu|stage" -j4) in /tmp/build, built first where the
#                               machine has none (build.log), cut at UNTIL s of the script: ctest_gpu.log, its summary
#                               line, failures and test time printed; returns 1 when the build fails
#   gpu_suite_rest LOG UNTIL    the suite's tests that a cut gpu_suite (its ctest_gpu.log: LOG) did not finish, cut
#                               at UNTIL s: suite_rest.txt names them, ctest_rest.log; "suite rest: none" when all finished
#   save_probe_inputs SHAPE...  the inputs that python/op_overhead_probe.py and bench/peers.py read, by stage 01's
#                               --save from /tmp/build (seed 1234; realistic data, gemma2_flat random): lm32k in
#                               /tmp/lm-gen/lm32k, gemma2, gemma2_flat, llama3 and gpt2 in /tmp/cce-inputs/<shape>;
#                               save_<shape>.log each

call_start() {
  R=$OUT/$1; mkdir -p $R
  { echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short | head; nvidia-smi -L; } > $R/status.txt 2>&1
}

train_lm_models() {
  local m
  for m in lm32k lm128k; do
    (timeout 420 python3 bench/lm_data.py --out /tmp/cce-lm-data --only $m > $R/lm_data_$m.log 2>&1
     echo "lm_data $m rc $? at $((SECONDS-T0)) s" > $R/lm_data_$m.rc) &
  done
}

tree_without() {
  local dir=$1 patch; shift
  rm -rf $dir && mkdir -p $dir && tar --exclude=./.git -cf - . | tar -xf - -C $dir
  for patch in "$@"; do
    patch -R -p1 -d $dir < "$patch" >> $R/patch_reverse.log 2>&1 || echo "reversing $patch in $dir failed"
  done
}

build() {
  local dir=$1 src=$2; shift 2
  cmake -S $src -B $dir -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C $dir "$@"
}

tree_with_edit() {
  local dir=$1 file=$2 expression=$3
  tree_without $dir
  sed -i "$expression" $dir/$file
  ! cmp -s $file $dir/$file || { echo "tree_with_edit: $expression left $file unchanged"; return 1; }
}

builds_side_by_side() {
  local targets=$1 pair name src dir; shift
  for pair in "$@"; do
    name=${pair%%=*}; src=${pair#*=}; dir=/tmp/build-$name; [ "$src" = . ] && dir=/tmp/build
    (build $dir $src $targets > $R/build_$name.log 2>&1; echo "$name build rc $?") &
  done
  wait
  echo "builds $((SECONDS-T0)) s"
}

branch_and_main_builds() {
  local patch=$1 main_build; shift
  tree_without /tmp/main-tree $patch
  (build /tmp/build-main /tmp/main-tree "$@" > $R/build_main.log 2>&1) &
  main_build=$!
  build /tmp/build . > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; wait $main_build; return 1; }
  wait $main_build
  echo "builds $((SECONDS-T0)) s"
}

stage10_rounds() {
  local rounds=$1 shapes=$2; shift 2
  local round pair tree dir filter
  for round in $(seq 1 $rounds); do
    filter='^stage10_plan_per_batch/loss_grad/'; [ $round = 1 ] && filter='^(cublas_floor|stage10_plan_per_batch)/loss_grad/'
    for pair in "$@"; do
      tree=${pair%%=*}; dir=${pair#*=}
      timeout $((585 - (SECONDS-T0))) $dir/bench/cce_bench --shapes=$shapes --lm-data=/tmp/cce-lm-data \
        --benchmark_filter="$filter" --benchmark_out=$R/bench_${tree}_$round.json --benchmark_out_format=json \
        > $R/bench_${tree}_$round.txt 2>&1
      echo "$tree round $round rc $? at $((SECONDS-T0)) s"
      grep -E "_median" $R/bench_${tree}_$round.txt | grep -oE "^[a-z0-9_]+/loss_grad/[a-z0-9_]+|manual_time_median +[0-9.]+|drop_eps_log2=[-0-9.]+|kept_frac=[0-9.]+" \
        | paste -sd' ' | sed 's/ \([a-z0-9_]*\/loss_grad\)/\n\1/g'
    done
  done
}

plan_kernel_times() {
  local regex=$1; shift
  local trees=("$@") shape name d v pair tree dir
  for shape in "lm32k 768 32000" "gemma2 2304 256000"; do
    read -r name d v <<< "$shape"
    for pair in "${trees[@]}"; do
      tree=${pair%%=*}; dir=${pair#*=}
      [ $((SECONDS-T0)) -gt 570 ] && return
      timeout 20 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:"$regex" \
        $dir/stages/stage10_plan_per_batch --n 8192 --d $d --v $v --dtype bf16 --data realistic --seed 1234 \
        --plan sparse --backward --iters 0 > $R/ncu_${name}_$tree.txt 2>&1
      echo "$name $tree rc $?: $(python3 docs/profiles/device_steps/ncu_durations.py $R/ncu_${name}_$tree.txt | paste -sd';')"
    done
  done
}

mass_kernel_memory() {
  local pair tree dir
  for pair in "$@"; do
    tree=${pair%%=*}; dir=${pair#*=}
    [ $((SECONDS-T0)) -gt 570 ] && return
    timeout 40 ncu --clock-control none -k regex:misplaced_mass_kernel -c 1 --metrics \
      gpu__time_duration.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum \
      $dir/stages/stage10_plan_per_batch --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 \
      --plan sparse --backward --iters 0 > $R/ncu_mass_$tree.txt 2>&1
    echo "mass kernel $tree rc $?: $(grep -E 'gpu__time_duration|requests|sectors|hit_rate|dram__bytes' $R/ncu_mass_$tree.txt | awk '{printf "%s %s %s; ", $1, $2, $NF}')"
  done
}

stage10_sanitizers() {
  local tool
  for tool in memcheck racecheck; do
    timeout 30 compute-sanitizer --tool $tool --error-exitcode 1 $1/stages/stage10_plan_per_batch --n 300 --d 200 \
      --v 20001 --dtype bf16 --data realistic --plan sparse --check --backward --iters 0 > $R/sanitizer_$tool.txt 2>&1
    echo "$tool rc $? at $((SECONDS-T0)) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/sanitizer_$tool.txt)"
  done
}

dense_kept_kernels() {
  local pair tree dir
  for pair in "$@"; do
    tree=${pair%%=*}; dir=${pair#*=}
    timeout 80 ncu --clock-control none --metrics gpu__time_duration.sum \
      -k regex:"recompute_kept|dc_products|de_products" $dir/stages/stage10_plan_per_batch --n 8192 --d 4096 \
      --v 128256 --dtype bf16 --data random --seed 1234 --backward --plan sparse --iters 0 > $R/ncu_llama3_flat_$tree.txt 2>&1
    echo "llama3_flat ncu $tree rc $? ($((SECONDS-T0)) s)"
    python3 docs/profiles/session61_h200/kept_tflops.py $R/ncu_llama3_flat_$tree.txt
  done
}

gpu_suite() {
  [ -x /tmp/build/stages/stage10_plan_per_batch ] || build /tmp/build . > $R/build.log 2>&1 || { tail -30 $R/build.log; return 1; }
  (cd /tmp/build && timeout $(($1 - (SECONDS-T0))) ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
  echo "suite rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_gpu.log)"
  grep -E '\*\*\*Failed|Timeout|Not Run|Failed  ' $R/ctest_gpu.log | head -20; grep -E 'Total Test time' $R/ctest_gpu.log
}

save_probe_inputs() {
  local shape dims dir data
  for shape in "$@"; do
    data=realistic
    case $shape in
      lm32k) dims="--n 8192 --d 768 --v 32000" dir=/tmp/lm-gen/lm32k ;;
      gemma2) dims="--n 8192 --d 2304 --v 256000" dir=/tmp/cce-inputs/gemma2 ;;
      gemma2_flat) dims="--n 8192 --d 2304 --v 256000" dir=/tmp/cce-inputs/gemma2_flat data=random ;;
      llama3) dims="--n 8192 --d 4096 --v 128256" dir=/tmp/cce-inputs/llama3 ;;
      gpt2) dims="--n 20480 --d 768 --v 50257" dir=/tmp/cce-inputs/gpt2 ;;
      *) echo "save_probe_inputs: no shape $shape (lm32k, gemma2, gemma2_flat, llama3, gpt2)"; return 1 ;;
    esac
    mkdir -p $(dirname $dir)
    timeout 60 /tmp/build/stages/stage01_materialized $dims --dtype bf16 --data $data --seed 1234 --save $dir \
      --save-large --iters 0 > $R/save_$shape.log 2>&1 || echo "save $shape failed"
  done
}

gpu_suite_rest() {
  local log=$1 until=$2 part regex
  (cd /tmp/build && ctest -N -L "gpu|stage") | sed -nE 's/^ *Test +#[0-9]+: (.*)$/\1/p' | sort > $R/suite_all.txt
  sed -nE 's/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: ([^ ]+) .*/\1/p' $log | sort > $R/suite_finished.txt
  comm -23 $R/suite_all.txt $R/suite_finished.txt > $R/suite_rest.txt
  [ -s $R/suite_rest.txt ] || { echo "suite rest: none ($(wc -l < $R/suite_finished.txt) finished)"; return 0; }
  rm -f /tmp/suite_rest_part.*; split -l 50 -d -a 3 $R/suite_rest.txt /tmp/suite_rest_part.  # short regexes for ctest
  for part in /tmp/suite_rest_part.*; do
    regex="^($(sed 's/[].[+*?()|^$]/\\&/g' $part | paste -sd'|'))\$"
    (cd /tmp/build && timeout $((until - (SECONDS-T0))) ctest -L "gpu|stage" -R "$regex" -j4 --timeout 300) >> $R/ctest_rest.log 2>&1
  done
  echo "suite rest ($((SECONDS-T0)) s, $(wc -l < $R/suite_rest.txt) tests): $(grep -E 'tests passed' $R/ctest_rest.log | paste -sd';')"
  grep -E '\*\*\*Failed|Timeout|Not Run|Failed  ' $R/ctest_rest.log | head -20
}
