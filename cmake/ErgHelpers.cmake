# Common compile options for erg targets.
function(erg_target_options target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wno-missing-field-initializers)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12)
    # GCC 12 at -O3 warns -Wrestrict falsely inside std::string concatenation (GCC bug 105329).
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  if(ERG_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# erg_add_test(NAME name SOURCES ... LIBS ...): one GoogleTest executable registered with CTest.
function(erg_add_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;PROPERTIES" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  erg_target_options(${T_NAME})
  target_compile_definitions(${T_NAME} PRIVATE
    ERG_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    ERG_BINARY_DIR="${PROJECT_BINARY_DIR}")
  # PROPERTIES: more ctest properties for every test of the binary (e.g. RUN_SERIAL TRUE).
  gtest_discover_tests(${T_NAME} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120 ${T_PROPERTIES})
endfunction()
