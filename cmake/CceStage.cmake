# cce_add_stage(NN name SOURCES file.cu ... [BACKWARD] [OUTSIDE_TABLE] [USES NN_name ...] [LIBS target ...]
#               [CHECK_ARGS ...])
#
# Adds one stage of stages/NN_name/:
#   - stageNN_name_lib: the stage's kernels (the GPU tests and benchmarks link it),
#   - stageNN_name:     its executable, from main.cu,
#   - ctest checks of the executable against the CPU reference on a small odd
#     problem (N=77 D=100 V=1129), in fp32 and bf16, with SKIP_RETURN_CODE 77
#     so that a machine without a GPU reports them as skipped,
#   - an entry in the stage table (cce_stage_table) that tests and benchmarks loop over,
#   - a dependency of cce_stages, the target that builds every stage executable.
# BACKWARD: the stage has a backward, so the checks also compare dE and dC.
# USES: earlier stages whose building blocks this one includes (linked, never copied).
# LIBS: other libraries the stage links (stage 11: NCCL).
# OUTSIDE_TABLE: the stage has a driver of its own and no stage-table entry
#   (stage 11's inputs live on several GPUs, the table's on one).
# (The tile engine in common/tile/ comes with cce_common.)
#
# With -DCCE_EXERCISE=05 (or 2,5, or all), the stage's exercise is built too:
# stageNN_name_exercise, the stage compiled with the files of its exercise/
# folder in place of the solution's (a source there replaces the source of the
# same name; a header there is found first by the stage's own sources), and
# the same two checks of it, exercise.NN_name.*, label exercise. A stub that
# is still there prints "exercise NN_name: ... is missing" when it runs
# (common/exercise.h), and the check fails on that line.
set(CCE_EXERCISE "" CACHE STRING "stage exercises to build: a list of stage numbers (02;05 or 2,5), or all")
string(REPLACE "," ";" cce_exercise_list "${CCE_EXERCISE}")
set(CCE_EXERCISE_STAGES "")
foreach(item IN LISTS cce_exercise_list)
  if(item STREQUAL "all")
    list(APPEND CCE_EXERCISE_STAGES 01 02 03 04 05 06 07 08 09 10)
  elseif(item MATCHES "^0?([1-9]|10)$")
    string(LENGTH "${CMAKE_MATCH_1}" digits)
    if(digits EQUAL 1)
      list(APPEND CCE_EXERCISE_STAGES "0${CMAKE_MATCH_1}")
    else()
      list(APPEND CCE_EXERCISE_STAGES "${CMAKE_MATCH_1}")
    endif()
  elseif(NOT item STREQUAL "")
    message(FATAL_ERROR "CCE_EXERCISE: '${item}' is not a stage from 01 to 10 (or all)")
  endif()
endforeach()

# The two checks of a stage executable on the small odd problem, named
# <prefix>.check_fp32 and <prefix>.check_bf16_softcap_ignore.
function(cce_add_stage_checks prefix target backward labels)
  set(small --check --n 77 --d 100 --v 1129 --iters 2)
  if(backward)
    list(APPEND small --backward)
  endif()
  add_test(NAME ${prefix}.check_fp32 COMMAND ${target} ${small} --dtype fp32 --data random ${ARGN})
  add_test(NAME ${prefix}.check_bf16_softcap_ignore
           COMMAND ${target} ${small} --dtype bf16 --softcap 30 --ignore-frac 0.1 ${ARGN})
  set_tests_properties(${prefix}.check_fp32 ${prefix}.check_bf16_softcap_ignore
                       PROPERTIES SKIP_RETURN_CODE 77 LABELS "${labels}")
endfunction()

function(cce_add_stage number name)
  cmake_parse_arguments(ARG "BACKWARD;OUTSIDE_TABLE" "" "SOURCES;USES;LIBS;CHECK_ARGS" ${ARGN})
  set(stage stage${number}_${name})
  set(dir ${CMAKE_CURRENT_SOURCE_DIR}/${number}_${name})
  list(TRANSFORM ARG_SOURCES PREPEND ${dir}/)
  add_library(${stage}_lib STATIC ${ARG_SOURCES})
  target_link_libraries(${stage}_lib PUBLIC cce_common)
  foreach(used IN LISTS ARG_USES)
    target_link_libraries(${stage}_lib PUBLIC stage${used}_lib)
  endforeach()
  target_link_libraries(${stage}_lib PUBLIC ${ARG_LIBS})
  target_compile_options(${stage}_lib PRIVATE ${CCE_WARNINGS})
  add_executable(${stage} ${dir}/main.cu)
  target_link_libraries(${stage} PRIVATE ${stage}_lib)
  target_compile_options(${stage} PRIVATE ${CCE_WARNINGS})

  cce_add_stage_checks(${stage} ${stage} "${ARG_BACKWARD}" "gpu;stage" ${ARG_CHECK_ARGS})
  # cce_stages: every stage executable, what `ctest -L stage` runs (bench/class_run.sh --quick builds it).
  if(NOT TARGET cce_stages)
    add_custom_target(cce_stages)
  endif()
  add_dependencies(cce_stages ${stage})

  if(number IN_LIST CCE_EXERCISE_STAGES)
    if(NOT EXISTS ${dir}/exercise)
      message(FATAL_ERROR "CCE_EXERCISE: stage ${number} has no exercise/ folder")
    endif()
    set(exercise ${stage}_exercise)
    set(headers ${CMAKE_BINARY_DIR}/exercise/${stage})
    set(sources ${ARG_SOURCES})
    file(GLOB exercise_files ${dir}/exercise/*)
    foreach(file IN LISTS exercise_files)
      get_filename_component(file_name ${file} NAME)
      if(file_name STREQUAL "README.md")
        continue()
      endif()
      list(FIND sources ${dir}/${file_name} at)
      if(at GREATER_EQUAL 0)
        list(REMOVE_AT sources ${at})
        list(INSERT sources ${at} ${file})
      else()
        # The stage's sources include stages/NN_name/<header>: this one is found first.
        file(CONFIGURE OUTPUT ${headers}/stages/${number}_${name}/${file_name}
             CONTENT "#include \"${file}\"\n")
      endif()
    endforeach()
    add_library(${exercise}_lib STATIC ${sources})
    target_include_directories(${exercise}_lib BEFORE PRIVATE ${headers})
    target_link_libraries(${exercise}_lib PUBLIC cce_common ${ARG_LIBS})
    foreach(used IN LISTS ARG_USES)
      target_link_libraries(${exercise}_lib PUBLIC stage${used}_lib)
    endforeach()
    # No -Werror: a blank exercise leaves variables unused.
    add_executable(${exercise} ${dir}/main.cu)
    target_link_libraries(${exercise} PRIVATE ${exercise}_lib)
    cce_add_stage_checks(exercise.${number}_${name} ${exercise} "${ARG_BACKWARD}" exercise ${ARG_CHECK_ARGS})
    set_tests_properties(exercise.${number}_${name}.check_fp32 exercise.${number}_${name}.check_bf16_softcap_ignore
                         PROPERTIES FAIL_REGULAR_EXPRESSION "exercise [0-9][0-9]_[a-z_]+: .* is missing \\(stages/"
                                    TIMEOUT 120)  # a lock never released ends as a failure, not a hang
  endif()

  if(ARG_OUTSIDE_TABLE)
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY CCE_STAGE_IDS "${number}")
  set_property(GLOBAL APPEND PROPERTY CCE_STAGE_LIBS "${stage}_lib")
endfunction()

# Writes the stage table from every cce_add_stage call above it: a function
# list of cce::sNN::make_stage, in stage order.
function(cce_write_stage_table)
  get_property(ids GLOBAL PROPERTY CCE_STAGE_IDS)
  get_property(libs GLOBAL PROPERTY CCE_STAGE_LIBS)
  set(decls "")
  set(entries "")
  foreach(id IN LISTS ids)
    string(APPEND decls "namespace cce::s${id} { std::unique_ptr<Stage> make_stage(); }\n")
    string(APPEND entries "      &cce::s${id}::make_stage,\n")
  endforeach()
  set(file ${CMAKE_BINARY_DIR}/generated/stage_table.cpp)
  file(CONFIGURE OUTPUT ${file} CONTENT [=[
// Generated by cce_write_stage_table() (cmake/CceStage.cmake): do not edit.
#include "common/stage_table.h"

namespace cce { class Stage; }
@decls@
namespace cce {
const std::vector<StageFactory>& all_stages() {
  static const std::vector<StageFactory> table = {
@entries@  };
  return table;
}
}  // namespace cce
]=] @ONLY)
  add_library(cce_stage_table STATIC ${file})
  target_link_libraries(cce_stage_table PUBLIC ${libs})
endfunction()
