# The C++ test programs, in two builds: the test build (tests/CMakeLists.txt) and the fuzz build
# (tests/fuzz/CMakeLists.txt), which makes the same programs under ASan + UBSan for the asan_*
# tests. Set QUILT_TEST_MODELS_DIR (tests/models/gen_test_models.py's output) before including.

# Runs a folder of op cases (tests/cases/gen_*.py: models with inputs and onnxruntime's outputs).
add_executable(case_runner ${PROJECT_SOURCE_DIR}/tests/tools/case_runner.cpp
                           ${PROJECT_SOURCE_DIR}/tools/quilt/onnx_case.cpp)
target_include_directories(case_runner PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(case_runner PRIVATE quilt_internal)
# Next to the quilt CLI: statically linked, it finds the shipped plugins (quilt-backends/) there.
set_target_properties(case_runner PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})

# Unit and integration tests (GoogleTest).
file(GLOB_RECURSE QUILT_UNIT_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/core/*.cpp
     ${PROJECT_SOURCE_DIR}/tests/backends/*.cpp ${PROJECT_SOURCE_DIR}/tests/partitioner/*.cpp)
list(FILTER QUILT_UNIT_TESTS EXCLUDE REGEX "/backends/opencl/")  # its own executable
add_executable(quilt_unit_tests ${QUILT_UNIT_TESTS})
target_include_directories(quilt_unit_tests PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_definitions(quilt_unit_tests PRIVATE QUILT_TEST_MODELS_DIR="${QUILT_TEST_MODELS_DIR}"
                                                   QUILT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
target_link_libraries(quilt_unit_tests PRIVATE quilt_internal GTest::gtest GTest::gtest_main Threads::Threads)
# The heterogeneous tests load the example plugin (tests/plugins) and its broken variants by path.
target_compile_definitions(quilt_unit_tests PRIVATE
  QUILT_EXAMPLE_PLUGIN_PATH="$<TARGET_FILE:quilt_example>"
  QUILT_BAD_ABI_PLUGIN_PATH="$<TARGET_FILE:quilt_example_bad_abi>"
  QUILT_INIT_FAIL_PLUGIN_PATH="$<TARGET_FILE:quilt_example_init_fail>"
  QUILT_NO_ENTRY_PLUGIN_PATH="$<TARGET_FILE:quilt_no_entry>"
  QUILT_FAULTY_PLUGIN_PATH="$<TARGET_FILE:quilt_example_faulty>"
  QUILT_TEST_WORK_DIR="${CMAKE_BINARY_DIR}/unit_tests_work")
add_dependencies(quilt_unit_tests quilt_example quilt_example_bad_abi quilt_example_init_fail
                 quilt_no_entry quilt_example_faulty)
