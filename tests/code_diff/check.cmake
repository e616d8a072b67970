# cmake -DWARMUP=<arfuse-warmup> -DCACHE=<arfuse-cache> -DTEMPLATES=<arfuse/templates> -DWORK=<scratch> -P check.cmake
# arfuse-cache code-diff on sm_90 caches warmed here (NVRTC, no GPU): templates with a comment or
# an unused constant added give the same code for every spec; an f32 add turned into a subtraction changes the
# kernels that add in f32 (BF16 none and per-token FP8) and not MXFP4's, which adds in pairs on
# sm_90; 32 bytes more shared memory is shown as the kernels' footprint change; a missing folder is a
# usage error, not a list of missing specs.
cmake_minimum_required(VERSION 3.20)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

function(run expected_rc)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL expected_rc)
    message(FATAL_ERROR "exit ${rc}, not ${expected_rc}: ${ARGN}\n${out}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

function(expect text)
  string(FIND "${last_output}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected '${text}' in:\n${last_output}")
  endif()
endfunction()

file(WRITE ${WORK}/specs.json [=[{"specs": [{"module": "rmsnorm_quant", "hidden": [2048], "dtype": ["bf16"],
  "quant": ["none", "fp8", "mxfp4"], "norm": ["rms"]}], "targets": ["sm_90"]}]=])

function(warm name templates)
  run(0 ${CMAKE_COMMAND} -E env ARFUSE_TEMPLATE_DIR=${templates}
      ${WARMUP} --config ${WORK}/specs.json --cache-dir ${WORK}/${name} --jobs 2 --quiet)
endfunction()

function(copy_templates name find replace)
  file(COPY ${TEMPLATES}/ DESTINATION ${WORK}/${name})
  file(READ ${WORK}/${name}/epilogue.cuh text)
  string(FIND "${text}" "${find}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "epilogue.cuh no longer has '${find}': update this test")
  endif()
  string(REPLACE "${find}" "${replace}" text "${text}")
  file(WRITE ${WORK}/${name}/epilogue.cuh "${text}")
endfunction()

copy_templates(commented "// Step 2: res = T(ar + residual_in)" "// (a comment)\n  // Step 2: res = T(ar + residual_in)")
copy_templates(subtracting "a[j] = a[j] + r[j];" "a[j] = a[j] - r[j];")
# 32 more bytes of shared memory in every kernel: the footprint is shown with the code's difference.
copy_templates(bigger "float sum[kWarpSize + 1];" "float sum[kWarpSize + 9];")
# An unused namespace constant moves every slot of NVRTC's table of such constants' addresses and
# the symbol indices; no kernel reads that table, so the code sections stay equal.
copy_templates(constant "// Step 2: res = T(ar + residual_in)" "// (a constant)\n  // Step 2: res = T(ar + residual_in)")
file(READ ${WORK}/constant/limits.cuh text)
string(REPLACE "namespace arfuse {" "namespace arfuse {\ninline constexpr int kUnusedByAnyKernel = 5;" text "${text}")
file(WRITE ${WORK}/constant/limits.cuh "${text}")
warm(original ${TEMPLATES})
warm(commented ${WORK}/commented)
warm(subtracting ${WORK}/subtracting)
warm(constant ${WORK}/constant)
warm(bigger ${WORK}/bigger)

run(0 ${CACHE} --cache-dir ${WORK}/original code-diff ${WORK}/commented)
expect("3 specs with the same code, 0 differ, 0 only in")
run(0 ${CACHE} --cache-dir ${WORK}/original code-diff ${WORK}/constant)
expect("3 specs with the same code, 0 differ, 0 only in")
run(1 ${CACHE} --cache-dir ${WORK}/original code-diff ${WORK}/subtracting)
expect("DIFFERS rmsnorm_quant/h2048/bf16/none/rms/sm_90")
expect("DIFFERS rmsnorm_quant/h2048/bf16/fp8/rms/sm_90")
expect("1 specs with the same code, 2 differ, 0 only in")
run(1 ${CACHE} --cache-dir ${WORK}/original code-diff ${WORK}/bigger)
expect("0 specs with the same code, 3 differ, 0 only in")
string(REGEX MATCH "DIFFERS rmsnorm_quant/h2048/bf16/mxfp4/rms/sm_90 \\(shared ([0-9]+) -> ([0-9]+) B; [0-9]+ -> [0-9]+ blocks of 256 threads per SM\\)" line "${last_output}")
if(line)
  math(EXPR grown "${CMAKE_MATCH_1} + 32")
endif()
if(NOT line OR NOT CMAKE_MATCH_2 EQUAL grown)
  message(FATAL_ERROR "expected MXFP4's shared memory 32 bytes larger, shown with its blocks per SM:\n${last_output}")
endif()
file(GLOB commented_entries ${WORK}/commented/*.arfuse)
list(GET commented_entries 0 one_entry)
file(REMOVE ${one_entry})
run(1 ${CACHE} --cache-dir ${WORK}/original code-diff ${WORK}/commented)
expect("2 specs with the same code, 0 differ, 1 only in ${WORK}/original, 0 only in")
run(2 ${CACHE} --cache-dir ${WORK}/original code-diff ${WORK}/no-such-cache)
expect("cache folder ${WORK}/no-such-cache does not exist")
run(2 ${CACHE} --cache-dir ${WORK}/original code-diff)
expect("code-diff takes one folder")
message(STATUS "code-diff: same, differing, missing and usage cases as expected")
