# cmake -DSOURCE=<arfuse source> -DWORK=<scratch folder> -DMODE=find_package|subdirectory -P check.cmake
#   find_package: builds arfuse as a shared library with its tools, installs it, checks that the
#     tools run and link libarfuse.so, then builds and runs tests/downstream against the install
#     tree with every public header included;
#   subdirectory: builds and runs tests/downstream with arfuse added by add_subdirectory.
cmake_minimum_required(VERSION 3.20)
include(${SOURCE}/cmake/public_headers.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
cmake_host_system_information(RESULT jobs QUERY NUMBER_OF_LOGICAL_CORES)

function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}\n${out}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

set(all_headers ${WORK}/all_headers.cpp)
set(text "// Every installed header, each compiled in a downstream project.\n")
foreach(header IN LISTS ARFUSE_PUBLIC_HEADERS)
  string(APPEND text "#include <arfuse/${header}>\n")
endforeach()
file(WRITE ${all_headers} "${text}")

if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/arfuse-build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON
      -DARFUSE_BUILD_TESTS=OFF -DARFUSE_INSTALL=ON)
  run(${CMAKE_COMMAND} --build ${WORK}/arfuse-build -j${jobs})
  run(${CMAKE_COMMAND} --install ${WORK}/arfuse-build --prefix ${WORK}/install)
  file(GLOB_RECURSE installed RELATIVE ${WORK}/install/include/arfuse ${WORK}/install/include/arfuse/*)
  list(SORT installed)
  set(expected ${ARFUSE_PUBLIC_HEADERS})
  list(SORT expected)
  if(NOT installed STREQUAL expected)
    message(FATAL_ERROR "installed headers differ from cmake/public_headers.cmake:\n${installed}\nvs\n${expected}")
  endif()
  foreach(tool warmup cache bench)
    run(readelf -d ${WORK}/install/bin/arfuse-${tool})
    if(NOT last_output MATCHES "libarfuse\\.so")
      message(FATAL_ERROR "arfuse-${tool} does not link libarfuse.so")
    endif()
    run(${WORK}/install/bin/arfuse-${tool} --help)
  endforeach()
  run(${CMAKE_COMMAND} -S ${SOURCE}/tests/downstream -B ${WORK}/downstream -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_PREFIX_PATH=${WORK}/install -DDOWNSTREAM_EXTRA_SOURCES=${all_headers})
elseif(MODE STREQUAL "subdirectory")
  run(${CMAKE_COMMAND} -S ${SOURCE}/tests/downstream -B ${WORK}/downstream -DCMAKE_BUILD_TYPE=Release
      -DARFUSE_SOURCE_DIR=${SOURCE} -DARFUSE_BUILD_TOOLS=OFF)
else()
  message(FATAL_ERROR "MODE must be find_package or subdirectory")
endif()
run(${CMAKE_COMMAND} --build ${WORK}/downstream -j${jobs})
run(${WORK}/downstream/downstream)
message(STATUS "downstream ${MODE}: ${last_output}")
