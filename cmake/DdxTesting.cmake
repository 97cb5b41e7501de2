include(GoogleTest)

# ddx_add_gtest(NAME SOURCES a.cpp... [LIBS ...] [LABELS ...] [TIMEOUT s] [DEPENDS targets...] [SERIAL])
# One GoogleTest executable; each TEST becomes its own CTest entry with a hard timeout.
# SERIAL: its tests run alone under ctest -j (they judge rates between ranks, which other tests'
# processes on the same cores would skew).
# Tests that start processes get the paths of the binaries they drive as compile definitions:
#   DDX_BIN (the ddx front end), DDX_TEST_WORKER (tests/workers/test_worker).
function(ddx_add_gtest name)
  cmake_parse_arguments(T "SERIAL" "TIMEOUT" "SOURCES;LIBS;LABELS;DEPENDS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    DDX_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
    DDX_BINARY_DIR="${CMAKE_BINARY_DIR}")
  foreach(dep IN LISTS T_DEPENDS)
    add_dependencies(${name} ${dep})
  endforeach()
  if(TARGET ddx)
    target_compile_definitions(${name} PRIVATE DDX_BIN="$<TARGET_FILE:ddx>")
  endif()
  if(TARGET test_worker)
    target_compile_definitions(${name} PRIVATE DDX_TEST_WORKER="$<TARGET_FILE:test_worker>")
  endif()
  # One label per test: a list would not survive gtest_discover_tests' PROPERTIES pass-through.
  list(LENGTH T_LABELS label_count)
  if(label_count GREATER 1)
    message(FATAL_ERROR "ddx_add_gtest(${name}): give one label, got ${T_LABELS}")
  endif()
  if(T_SERIAL)
    set(serial TRUE)
  else()
    set(serial FALSE)
  endif()
  gtest_discover_tests(${name}
    DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS ${T_LABELS} RUN_SERIAL ${serial})
endfunction()
