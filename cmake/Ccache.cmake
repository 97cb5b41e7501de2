# ccache in front of the compiler. The sloppiness settings let ccache cache translation
# units that use a precompiled header (GCC's PCH embeds mtimes and defines).
find_program(DDX_CCACHE ccache)
if(DDX_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(_ccache_env CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
                  CCACHE_MAXSIZE=5G)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env ${_ccache_env} ${DDX_CCACHE})
  set(CMAKE_C_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env ${_ccache_env} ${DDX_CCACHE})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${DDX_CCACHE})
  message(STATUS "ddx: compiling through ccache (${DDX_CCACHE})")
endif()
