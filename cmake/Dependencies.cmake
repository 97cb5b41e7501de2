# Libraries from Debian (ci/bootstrap.sh installs them). Each is a well-kept package we
# prefer over hand-written code.
find_package(Threads REQUIRED)
find_package(GTest REQUIRED)
find_package(benchmark REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(MPI REQUIRED COMPONENTS C)

# backward-cpp: symbolized stack traces (function, file, line) through libdw.
find_path(DDX_BACKWARD_INCLUDE backward.hpp REQUIRED)
find_library(DDX_LIBDW dw REQUIRED)
add_library(ddx_backward INTERFACE)
target_include_directories(ddx_backward INTERFACE ${DDX_BACKWARD_INCLUDE})
target_compile_definitions(ddx_backward INTERFACE BACKWARD_HAS_DW=1)
target_link_libraries(ddx_backward INTERFACE ${DDX_LIBDW} ${CMAKE_DL_LIBS})
