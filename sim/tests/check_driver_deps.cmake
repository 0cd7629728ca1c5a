# Checks that a simulated driver library stays free of erg's runtime dependencies.
#
#   cmake -DLIB=<lib> -DREADELF=<readelf> -P check_driver_deps.cmake
#     fails unless every NEEDED entry of LIB is libc, libm, libpthread or the dynamic loader.
#     The C++ runtime (libstdc++, libgcc_s) is not allowed: the driver is loaded into programs of
#     any language and version, like the real libnvidia-ml.so.1, which needs only libc, libm,
#     libpthread, libdl and librt. A sanitizer build (asan, tsan presets) puts its runtime into
#     every binary, and GCC's -fsanitize=undefined link adds libstdc++: with a sanitizer runtime
#     among the entries those are allowed too (the dev and release builds are the gate).
#   cmake -DSOURCE=<file> -DCXX=<compiler> "-DINCLUDES=<dirs>" -P check_driver_deps.cmake
#     fails if SOURCE, preprocessed with those include directories, reads a header of erg/core,
#     the simulator's control API, tl::expected or nlohmann::json.
cmake_minimum_required(VERSION 3.20)

if(DEFINED LIB)
  execute_process(COMMAND "${READELF}" -d "${LIB}" OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${READELF} -d ${LIB} failed (${rc})")
  endif()
  string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]\n]*\\]" lines "${dyn}")
  set(allowed "^(libc\\.so\\.6|libm\\.so\\.6|libpthread\\.so\\.0|ld-linux-x86-64\\.so\\.2|ld-linux-aarch64\\.so\\.1|lib(a|ub|t|l)san\\.so\\.[0-9]+)$")
  if(dyn MATCHES "\\[lib(a|ub|t|l)san\\.so")
    string(REPLACE ")$" "|libstdc\\+\\+\\.so\\.6|libgcc_s\\.so\\.1)$" allowed "${allowed}")
  endif()
  set(bad "")
  set(all "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE ".*\\[(.*)\\]" "\\1" name "${line}")
    list(APPEND all "${name}")
    if(NOT name MATCHES "${allowed}")
      list(APPEND bad "${name}")
    endif()
  endforeach()
  if(NOT all)
    message(FATAL_ERROR "no NEEDED entries found in ${LIB}: is it a shared library?")
  endif()
  if(bad)
    message(FATAL_ERROR "${LIB} needs ${bad} (NEEDED: ${all}); only libc, libm, libpthread and the loader are allowed")
  endif()
  message(STATUS "${LIB} NEEDED: ${all}")
elseif(DEFINED SOURCE)
  set(args -std=c++20 -M -MG)
  foreach(dir IN LISTS INCLUDES)
    if(dir STREQUAL "")  # an install-only include directory is empty in the build tree
      continue()
    endif()
    list(APPEND args "-I${dir}")
  endforeach()
  execute_process(COMMAND "${CXX}" ${args} "${SOURCE}" OUTPUT_VARIABLE deps ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${CXX} -M ${SOURCE} failed (${rc}): ${err}")
  endif()
  set(forbidden "erg/core/" "erg/sim/machine\\.hpp" "erg/sim/spec\\.hpp" "tl/expected" "nlohmann/")
  foreach(pattern IN LISTS forbidden)
    if(deps MATCHES "[^ \n]*${pattern}[^ \n]*")
      message(FATAL_ERROR "${SOURCE} includes ${CMAKE_MATCH_0}; the simulated driver builds from the shared state and the vendor ABI only")
    endif()
  endforeach()
  if(NOT deps MATCHES "nvml_abi\\.h" OR NOT deps MATCHES "state\\.hpp")
    message(FATAL_ERROR "${CXX} -M ${SOURCE} did not list nvml_abi.h and state.hpp: the check is not looking at the driver")
  endif()
  message(STATUS "${SOURCE}: no erg/core, control API, tl::expected or nlohmann headers")
else()
  message(FATAL_ERROR "pass -DLIB=... or -DSOURCE=...")
endif()
