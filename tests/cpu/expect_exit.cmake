# Runs a command and checks its exit code and output.
#
#   cmake -DEXE=<program> -DARGS=<arg>|<arg>|... -DEXPECT_RC=<code>[|<code>...]
#         [-DEXPECT_STDERR=<regex>] [-DEXPECT_STDOUT=<regex>]
#         [-DEXPECT_STDERR_<code>=<regex>] [-DEXPECT_STDOUT_<code>=<regex>]
#         [-DCLEAN_DIR=<dir>] [-DEXPECT_FILE=<path>] [-DONE_LINE_STDERR_RC=<code>] -P expect_exit.cmake
#
# ARGS and EXPECT_RC are '|'-separated (a ';' list would be split on its way
# through add_test); any of the EXPECT_RC codes passes (e.g. 0|77: a run that
# needs a GPU for its last step only). EXPECT_STDERR/EXPECT_STDOUT apply
# whatever the code; EXPECT_STDERR_<code>/EXPECT_STDOUT_<code> only when the
# run exits with <code>, so that each accepted code comes with its own output
# (2|77: exit 2 with its error, exit 77 with a SKIPPED line). Every accepted
# code needs at least one regex, and no regex may match an empty output: such
# a regex (an optional group or '.*' alone) would check nothing. CLEAN_DIR is
# removed before the run; EXPECT_FILE must exist after it. ONE_LINE_STDERR_RC:
# when the run exits with that code, stderr must be exactly one line (how every
# bad input, exit 2, is reported). Fails with FATAL_ERROR, printing both
# streams, on a different exit code, an output that does not match or a
# missing file.

if(NOT DEFINED EXE OR NOT DEFINED EXPECT_RC)
  message(FATAL_ERROR "expect_exit.cmake: EXE and EXPECT_RC are required")
endif()
string(REPLACE "|" ";" expected_codes "${EXPECT_RC}")
foreach(code IN LISTS expected_codes)
  set(regexes "")
  foreach(name EXPECT_STDERR EXPECT_STDOUT EXPECT_STDERR_${code} EXPECT_STDOUT_${code})
    if(DEFINED ${name})
      list(APPEND regexes ${name})
      if("" MATCHES "${${name}}")
        message(FATAL_ERROR "expect_exit.cmake: ${name} '${${name}}' matches an empty output, so it checks nothing")
      endif()
    endif()
  endforeach()
  if(NOT regexes)
    message(FATAL_ERROR "expect_exit.cmake: exit code ${code} has no regex: give EXPECT_STDERR/EXPECT_STDOUT "
                        "or EXPECT_STDERR_${code}/EXPECT_STDOUT_${code}")
  endif()
endforeach()

set(args "")
if(NOT "${ARGS}" STREQUAL "")
  string(REPLACE "|" ";" args "${ARGS}")
endif()

if(DEFINED CLEAN_DIR)
  file(REMOVE_RECURSE "${CLEAN_DIR}")
endif()

execute_process(COMMAND "${EXE}" ${args}
                RESULT_VARIABLE rc
                OUTPUT_VARIABLE out
                ERROR_VARIABLE err
                TIMEOUT 50)

string(REPLACE ";" " " shown_args "${args}")
set(report "command: ${EXE} ${shown_args}\nexit code: ${rc}\n--- stdout ---\n${out}\n--- stderr ---\n${err}")

list(FIND expected_codes "${rc}" rc_index)
if(rc_index EQUAL -1)
  message(FATAL_ERROR "expected exit code ${EXPECT_RC}, got ${rc}\n${report}")
endif()
if(DEFINED EXPECT_STDERR AND NOT "${err}" MATCHES "${EXPECT_STDERR}")
  message(FATAL_ERROR "stderr does not match '${EXPECT_STDERR}'\n${report}")
endif()
if(DEFINED EXPECT_STDOUT AND NOT "${out}" MATCHES "${EXPECT_STDOUT}")
  message(FATAL_ERROR "stdout does not match '${EXPECT_STDOUT}'\n${report}")
endif()
if(DEFINED EXPECT_STDERR_${rc} AND NOT "${err}" MATCHES "${EXPECT_STDERR_${rc}}")
  message(FATAL_ERROR "stderr does not match '${EXPECT_STDERR_${rc}}' (expected with exit code ${rc})\n${report}")
endif()
if(DEFINED EXPECT_STDOUT_${rc} AND NOT "${out}" MATCHES "${EXPECT_STDOUT_${rc}}")
  message(FATAL_ERROR "stdout does not match '${EXPECT_STDOUT_${rc}}' (expected with exit code ${rc})\n${report}")
endif()
if(DEFINED ONE_LINE_STDERR_RC AND rc STREQUAL "${ONE_LINE_STDERR_RC}")
  string(REGEX MATCHALL "\n" newlines "${err}")
  list(LENGTH newlines line_count)
  if(NOT line_count EQUAL 1 OR NOT "${err}" MATCHES "\n$")
    message(FATAL_ERROR "stderr is not one line\n${report}")
  endif()
endif()
if(DEFINED EXPECT_FILE AND NOT EXISTS "${EXPECT_FILE}")
  message(FATAL_ERROR "${EXPECT_FILE} was not written\n${report}")
endif()
# A run that exited 77 shows its stdout (the SKIPPED line), so that a test
# with SKIP_REGULAR_EXPRESSION reports skipped rather than passed.
if(rc STREQUAL "77")
  message(STATUS "${out}")
endif()
message(STATUS "ok: exit code ${rc}, output matches")
