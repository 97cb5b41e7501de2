# LibTorch from the project's virtualenv (ci/bootstrap.sh installs the pinned PyPI wheel).
#
# Gives: target ddx_torch (link it to use LibTorch + c10d), DDX_WITH_TORCH, DDX_WITH_CUDA, and
# ddx_torch_pch(target [SKIP ...]) to reuse one precompiled LibTorch header (the headers dominate the
# ~45 s a LibTorch translation unit costs on 2 cores).
#
# With the CUDA toolkit present (nvcc found), we use the wheel's own TorchConfig.cmake, which
# needs the toolkit, and get torch_cuda + c10d NCCL. Without it we build CPU-only against the
# same wheel's torch_cpu, so a machine without CUDA still builds and runs everything on Gloo.
option(DDX_CORE_ONLY "Build only the parts that do not need LibTorch" OFF)
set(DDX_WITH_TORCH OFF)
set(DDX_WITH_CUDA OFF)
if(DDX_CORE_ONLY)
  message(STATUS "ddx: DDX_CORE_ONLY=ON, skipping every LibTorch target")
  return()
endif()

set(DDX_PYTHON "${CMAKE_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
    "Python of the virtualenv holding the pinned torch wheel")
if(NOT EXISTS "${DDX_PYTHON}")
  message(FATAL_ERROR "ddx: ${DDX_PYTHON} not found; run ci/bootstrap.sh first (or pass -DDDX_PYTHON=...)")
endif()
execute_process(
  COMMAND "${DDX_PYTHON}" -c "import torch, os; print(torch.utils.cmake_prefix_path); print(os.path.dirname(torch.__file__)); print(torch.__version__)"
  OUTPUT_VARIABLE _torch_out RESULT_VARIABLE _torch_rc OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT _torch_rc EQUAL 0)
  message(FATAL_ERROR "ddx: ${DDX_PYTHON} cannot import torch; run ci/bootstrap.sh")
endif()
string(REPLACE "\n" ";" _torch_out "${_torch_out}")
list(GET _torch_out 0 DDX_TORCH_CMAKE_PREFIX)
list(GET _torch_out 1 DDX_TORCH_DIR)
list(GET _torch_out 2 DDX_TORCH_VERSION)

find_program(DDX_NVCC nvcc)
option(DDX_USE_CUDA "Build CUDA/NCCL code paths when the toolkit is present" ON)
add_library(ddx_torch INTERFACE)
if(DDX_USE_CUDA AND DDX_NVCC)
  list(APPEND CMAKE_PREFIX_PATH "${DDX_TORCH_CMAKE_PREFIX}")
  # Only PTX-free host code of ours uses CUDA; keep torch's arch probing quiet and quick.
  set(TORCH_CUDA_ARCH_LIST "9.0" CACHE STRING "")
  find_package(Torch REQUIRED)
  find_package(CUDAToolkit REQUIRED)
  target_link_libraries(ddx_torch INTERFACE ${TORCH_LIBRARIES} CUDA::cudart)
  set(DDX_WITH_CUDA ON)
  # Raw NCCL (version report, probes): the wheel's libnccl.so.2, the very library libtorch_cuda
  # loads, so one process never mixes two NCCL builds. Same version as the toolkit's (2.28.9).
  find_path(DDX_NCCL_INCLUDE nccl.h PATHS "${DDX_TORCH_DIR}/../nvidia/nccl/include" NO_DEFAULT_PATH)
  find_file(DDX_NCCL_LIBRARY libnccl.so.2 PATHS "${DDX_TORCH_DIR}/../nvidia/nccl/lib" NO_DEFAULT_PATH)
  if(NOT DDX_NCCL_INCLUDE OR NOT DDX_NCCL_LIBRARY)
    message(FATAL_ERROR "ddx: the torch wheel's NCCL (nvidia-nccl-cu13) was not found next to ${DDX_TORCH_DIR}")
  endif()
  add_library(ddx_nccl INTERFACE)
  target_include_directories(ddx_nccl SYSTEM INTERFACE "${DDX_NCCL_INCLUDE}")
  target_link_libraries(ddx_nccl INTERFACE "${DDX_NCCL_LIBRARY}" CUDA::cudart)
else()
  # CPU-only: the same wheel's CPU libraries, with the definitions torch_cpu would export.
  find_library(DDX_LIB_TORCH torch PATHS "${DDX_TORCH_DIR}/lib" NO_DEFAULT_PATH REQUIRED)
  find_library(DDX_LIB_TORCH_CPU torch_cpu PATHS "${DDX_TORCH_DIR}/lib" NO_DEFAULT_PATH REQUIRED)
  find_library(DDX_LIB_C10 c10 PATHS "${DDX_TORCH_DIR}/lib" NO_DEFAULT_PATH REQUIRED)
  target_include_directories(ddx_torch SYSTEM INTERFACE
    "${DDX_TORCH_DIR}/include" "${DDX_TORCH_DIR}/include/torch/csrc/api/include")
  target_compile_definitions(ddx_torch INTERFACE
    USE_DISTRIBUTED USE_C10D_GLOO USE_RPC USE_TENSORPIPE)
  target_link_libraries(ddx_torch INTERFACE
    ${DDX_LIB_TORCH} ${DDX_LIB_TORCH_CPU} ${DDX_LIB_C10} Threads::Threads)
  set_target_properties(ddx_torch PROPERTIES INTERFACE_LINK_DIRECTORIES "${DDX_TORCH_DIR}/lib")
endif()
# libtorch_cuda is only reached through registration side effects; keep it linked.
# libtorch.so exports its own statically linked copy of std::filesystem, whose remove_all
# jumps to a null pointer; naming libstdc++ first on the link line (it becomes the first
# DT_NEEDED) makes the dynamic linker bind std::filesystem to the system library instead.
target_link_options(ddx_torch INTERFACE "LINKER:--no-as-needed" "-lstdc++")
# The wheel ships ProcessGroupGloo.hpp but not the gloo headers it includes. Debian's
# libgloo-dev provides them; we compile against them only (every gloo type in the c10d header
# is held by pointer, so layouts come from torch's own header) and never link Debian's libgloo.
find_path(DDX_GLOO_INCLUDE gloo/algorithm.h)
if(NOT DDX_GLOO_INCLUDE)
  message(FATAL_ERROR "ddx: gloo headers not found; run ci/bootstrap.sh (installs libgloo-dev)")
endif()
target_compile_definitions(ddx_torch INTERFACE DDX_WITH_TORCH=1
  DDX_TORCH_VERSION="${DDX_TORCH_VERSION}")
if(DDX_WITH_CUDA)
  target_compile_definitions(ddx_torch INTERFACE DDX_WITH_CUDA=1)
endif()
set(DDX_WITH_TORCH ON)
message(STATUS "ddx: LibTorch ${DDX_TORCH_VERSION} from ${DDX_TORCH_DIR} (CUDA: ${DDX_WITH_CUDA})")

# One precompiled header for every LibTorch translation unit.
add_library(ddx_torch_pch OBJECT ${CMAKE_SOURCE_DIR}/cmake/torch_pch_anchor.cpp)
target_link_libraries(ddx_torch_pch PRIVATE ddx_torch)
target_precompile_headers(ddx_torch_pch PRIVATE ${CMAKE_SOURCE_DIR}/cmake/torch_pch.h)
# ddx_torch_pch(target [SKIP source...]): the sources after SKIP include no LibTorch header, so
# they compile without the precompiled one. Loading it costs about 6 s per file on 2 cores, more
# than most of them cost themselves (0.3-8 s without it). Paths are relative to the calling
# folder; a name that no longer exists stops the configure, so a moved file is noticed.
#
# A library's other sources are also compiled one folder at a time (a unity build: one generated
# file includes the folder's .cpp files): each LibTorch translation unit pays ~7 s before its own
# first line (the precompiled header and its debug information) and instantiates the same
# LibTorch templates again, so fewer, larger ones build the `ddx` target faster. Files of one
# folder must therefore not define the same name twice, even in an anonymous namespace.
# -DDDX_UNITY_BUILD=OFF compiles every file on its own (a quicker rebuild after editing one).
option(DDX_UNITY_BUILD "Compile each LibTorch library folder as one translation unit" ON)
function(ddx_torch_pch target)
  cmake_parse_arguments(PCH "" "" "SKIP" ${ARGN})
  target_precompile_headers(${target} REUSE_FROM ddx_torch_pch)
  foreach(source IN LISTS PCH_SKIP)
    if(NOT EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/${source})
      message(FATAL_ERROR "ddx_torch_pch(${target} SKIP ...): no file ${CMAKE_CURRENT_SOURCE_DIR}/${source}")
    endif()
    set_source_files_properties(${source} PROPERTIES SKIP_PRECOMPILE_HEADERS ON SKIP_UNITY_BUILD_INCLUSION ON)
  endforeach()
  get_target_property(type ${target} TYPE)
  if(DDX_UNITY_BUILD AND type STREQUAL "STATIC_LIBRARY")
    # Deferred to the end of the calling folder's CMakeLists.txt: sources are still being added.
    # (EVAL: a deferred call's arguments are otherwise expanded when it runs, not now.)
    cmake_language(EVAL CODE "cmake_language(DEFER CALL _ddx_unity_by_folder [[${target}]])")
  endif()
endfunction()

# One unity group per folder with two or more of the target's LibTorch sources; a folder's lone
# file compiles as it is.
function(_ddx_unity_by_folder target)
  get_target_property(sources ${target} SOURCES)
  set(folders "")
  foreach(source IN LISTS sources)
    get_source_file_property(skip ${source} SKIP_PRECOMPILE_HEADERS)
    if(skip OR NOT source MATCHES "\\.cpp$")
      continue()
    endif()
    get_filename_component(path ${source} ABSOLUTE)
    get_filename_component(folder ${path} DIRECTORY)
    file(RELATIVE_PATH folder ${CMAKE_SOURCE_DIR} ${folder})
    string(MAKE_C_IDENTIFIER "${folder}" group)
    list(APPEND folders ${group})
    list(APPEND "members_${group}" ${source})
  endforeach()
  list(REMOVE_DUPLICATES folders)
  set(grouped FALSE)
  foreach(group IN LISTS folders)
    list(LENGTH "members_${group}" count)
    if(count GREATER 1)
      set_source_files_properties(${members_${group}} PROPERTIES UNITY_GROUP ${group})
      set(grouped TRUE)
    else()
      set_source_files_properties(${members_${group}} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
  endforeach()
  if(grouped)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
  endif()
endfunction()
