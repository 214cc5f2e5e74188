# ctest helper: run PROGRAM and require its stdout to equal the file EXPECTED byte for byte, and
# its exit code to be 0.
#   cmake -DPROGRAM=<exe> -DEXPECTED=<file> -P compare_output.cmake
cmake_minimum_required(VERSION 3.25)
execute_process(COMMAND "${PROGRAM}" OUTPUT_VARIABLE actual ERROR_VARIABLE errors RESULT_VARIABLE rc)
file(READ "${EXPECTED}" expected)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${rc}: ${errors}")
endif()
if(NOT actual STREQUAL expected)
  message(FATAL_ERROR "${PROGRAM} printed:\n${actual}\nexpected (${EXPECTED}):\n${expected}")
endif()
