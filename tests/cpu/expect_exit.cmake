# Runs a command and checks its exit code and output.
#
#   cmake -DEXE=<program> -DARGS=<arg>|<arg>|... -DEXPECT_RC=<code>
#         [-DEXPECT_STDERR=<regex>] [-DEXPECT_STDOUT=<regex>] -P expect_exit.cmake
#
# ARGS is '|'-separated (a ';' list would be split on its way through add_test).
# Fails with FATAL_ERROR, printing both streams, on a different exit code or an
# output that does not match.

if(NOT DEFINED EXE OR NOT DEFINED EXPECT_RC)
  message(FATAL_ERROR "expect_exit.cmake: EXE and EXPECT_RC are required")
endif()
if(NOT DEFINED EXPECT_STDERR AND NOT DEFINED EXPECT_STDOUT)
  message(FATAL_ERROR "expect_exit.cmake: give EXPECT_STDERR and/or EXPECT_STDOUT")
endif()

set(args "")
if(NOT "${ARGS}" STREQUAL "")
  string(REPLACE "|" ";" args "${ARGS}")
endif()

execute_process(COMMAND "${EXE}" ${args}
                RESULT_VARIABLE rc
                OUTPUT_VARIABLE out
                ERROR_VARIABLE err
                TIMEOUT 50)

string(REPLACE ";" " " shown_args "${args}")
set(report "command: ${EXE} ${shown_args}\nexit code: ${rc}\n--- stdout ---\n${out}\n--- stderr ---\n${err}")

if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "expected exit code ${EXPECT_RC}, got ${rc}\n${report}")
endif()
if(DEFINED EXPECT_STDERR AND NOT "${err}" MATCHES "${EXPECT_STDERR}")
  message(FATAL_ERROR "stderr does not match '${EXPECT_STDERR}'\n${report}")
endif()
if(DEFINED EXPECT_STDOUT AND NOT "${out}" MATCHES "${EXPECT_STDOUT}")
  message(FATAL_ERROR "stdout does not match '${EXPECT_STDOUT}'\n${report}")
endif()
message(STATUS "ok: exit code ${rc}, output matches")
