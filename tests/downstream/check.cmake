# cmake -DSOURCE=<arfuse source> -DWORK=<scratch folder> -DMODE=find_package|subdirectory -P check.cmake
#   find_package: builds arfuse as a shared library with its tools, installs it, checks that the
#     tools run and that libarfuse.so exports no internal namespace (the tools link the internal
#     archive) and nothing but arfuse's own symbols, then builds and runs tests/downstream
#     against the install tree with every public header included;
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
    run(${WORK}/install/bin/arfuse-${tool} --help)
  endforeach()
  # libarfuse.so exports the public API only: no internal namespace, no internal class.
  file(GLOB library ${WORK}/install/lib*/libarfuse.so)
  # Mangled names of arfuse::jit, cache, reference, cuda, hip (std's own instantiations over
  # these types are std's, not arfuse's, and stay).
  run(nm -D --defined-only ${library})
  string(REGEX MATCHALL "_ZN[KV]?6arfuse(3jit|5cache|9reference|4cuda|3hip)[0-9A-Za-z_]+" internal "${last_output}")
  if(internal)
    list(REMOVE_DUPLICATES internal)
    message(FATAL_ERROR "libarfuse.so exports internals: ${internal}")
  endif()
  string(REGEX MATCHALL "\n[0-9a-f]+ [TDBVWRu] " exported "${last_output}")
  list(LENGTH exported count)
  message(STATUS "libarfuse.so exports ${count} symbols")
  # And nothing but arfuse's own: no standard-library instantiation it happened to emit.
  run(nm -D --defined-only -C ${library})
  string(REPLACE "\n" ";" lines "${last_output}")
  set(foreign "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^[0-9a-f]+ [A-Za-z] (.*)$")
      set(name "${CMAKE_MATCH_1}")
      if(NOT name MATCHES "^((typeinfo|typeinfo name|vtable|VTT) for )?arfuse::")
        list(APPEND foreign "${name}")
      endif()
    endif()
  endforeach()
  if(foreign)
    message(FATAL_ERROR "libarfuse.so exports symbols that are not arfuse's: ${foreign}")
  endif()
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
