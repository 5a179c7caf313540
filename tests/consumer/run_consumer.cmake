# run_consumer.cmake - checks that an installed tcqr is usable through find_package(TensorCoreQR CONFIG):
#   1. cmake --install <TCQR_BUILD_DIR> --prefix <WORK_DIR>/prefix
#   2. configure and build tests/consumer against that prefix only, with the same generator and compiler
#   3. run the consumer, which factors a small matrix and checks the result
# Any failure ends the script with FATAL_ERROR (a failed ctest test).
#
# Usage: cmake -DTCQR_BUILD_DIR=... -DCONSUMER_SOURCE_DIR=... -DWORK_DIR=... [-DGENERATOR=... -DGENERATOR_PLATFORM=...
#              -DGENERATOR_TOOLSET=... -DMAKE_PROGRAM=... -DCXX_COMPILER=... -DBUILD_TYPE=... -DCONFIG=...
#              -DEigen3_DIR=... -DCUDA_ROOT=...] -P run_consumer.cmake
cmake_minimum_required(VERSION 3.25)

foreach(var TCQR_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_consumer.cmake: ${var} is not set")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG "${BUILD_TYPE}")
endif()
if(NOT CONFIG)
  set(CONFIG Release)
endif()

set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "consumer check: ${what} failed (${rc})\n  command: ${cmd}\n--- stdout ---\n${out}\n"
                        "--- stderr ---\n${err}")
  endif()
  message(STATUS "consumer check: ${what}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

# 1. install
run_step("install into ${prefix}" "${CMAKE_COMMAND}" --install "${TCQR_BUILD_DIR}" --prefix "${prefix}" --config
         "${CONFIG}")

# 2. configure + build, with only the temporary prefix to find TensorCoreQR in
set(configure "${CMAKE_COMMAND}" -S "${CONSUMER_SOURCE_DIR}" -B "${build}" "-DCMAKE_PREFIX_PATH=${prefix}"
              "-DTCQR_EXPECTED_PREFIX=${prefix}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
              -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
if(GENERATOR)
  list(APPEND configure -G "${GENERATOR}")
endif()
if(GENERATOR_PLATFORM)
  list(APPEND configure -A "${GENERATOR_PLATFORM}")
endif()
if(GENERATOR_TOOLSET)
  list(APPEND configure -T "${GENERATOR_TOOLSET}")
endif()
if(MAKE_PROGRAM)
  list(APPEND configure "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(CXX_COMPILER)
  list(APPEND configure "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(BUILD_TYPE)
  list(APPEND configure "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}")
endif()
if(Eigen3_DIR)
  list(APPEND configure "-DEigen3_DIR=${Eigen3_DIR}")
endif()
if(CUDA_ROOT)
  list(APPEND configure "-DCUDAToolkit_ROOT=${CUDA_ROOT}")
endif()
run_step("configure the consumer" ${configure})
run_step("build the consumer" "${CMAKE_COMMAND}" --build "${build}" --config "${CONFIG}")

# 3. run
set(exe "${build}/bin/tcqr_consumer")
if(NOT EXISTS "${exe}" AND EXISTS "${exe}.exe")
  set(exe "${exe}.exe")
endif()
run_step("run the consumer" "${exe}")
message(STATUS "consumer output: ${step_output}")
