# Optional NCCL (2.28 or newer: the device API and symmetric windows) for rows sharded over GPUs
# (include/rss/sharded). Where it is found (headers nccl.h + nccl_device.h and libnccl), this defines
# RSS_NCCL_FOUND and the INTERFACE target rss::nccl (rss::rss plus NCCL); elsewhere nothing, and the
# single-GPU library is unchanged. Hints: NCCL_ROOT (CMake or environment variable), then the CUDA
# toolkit's folders, then the system's.
set(RSS_NCCL_FOUND OFF)
if(NOT TARGET CUDA::cudart)
  find_package(CUDAToolkit QUIET)
endif()

set(rss_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT})
if(CUDAToolkit_FOUND)
  list(APPEND rss_nccl_hints ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR})
  foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
    get_filename_component(parent "${dir}" DIRECTORY)
    list(APPEND rss_nccl_hints "${parent}")
  endforeach()
endif()

find_path(RSS_NCCL_INCLUDE_DIR nccl.h HINTS ${rss_nccl_hints} PATH_SUFFIXES include)
find_library(RSS_NCCL_LIBRARY NAMES nccl HINTS ${rss_nccl_hints} PATH_SUFFIXES lib lib64 lib/x64)

set(RSS_NCCL_VERSION "")
if(RSS_NCCL_INCLUDE_DIR AND EXISTS "${RSS_NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${RSS_NCCL_INCLUDE_DIR}/nccl.h" rss_nccl_version_lines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  foreach(part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${part} ([0-9]+)" _ "${rss_nccl_version_lines}")
    set(rss_nccl_${part} "${CMAKE_MATCH_1}")
  endforeach()
  if(NOT rss_nccl_MAJOR STREQUAL "")
    set(RSS_NCCL_VERSION "${rss_nccl_MAJOR}.${rss_nccl_MINOR}.${rss_nccl_PATCH}")
  endif()
endif()

if(RSS_NCCL_INCLUDE_DIR AND RSS_NCCL_LIBRARY AND EXISTS "${RSS_NCCL_INCLUDE_DIR}/nccl_device.h"
   AND RSS_NCCL_VERSION AND RSS_NCCL_VERSION VERSION_GREATER_EQUAL 2.28)
  set(RSS_NCCL_FOUND ON)
  add_library(rss_nccl INTERFACE)
  add_library(rss::nccl ALIAS rss_nccl)
  set_target_properties(rss_nccl PROPERTIES EXPORT_NAME nccl)
  target_include_directories(rss_nccl SYSTEM INTERFACE "${RSS_NCCL_INCLUDE_DIR}")
  target_link_libraries(rss_nccl INTERFACE rss "${RSS_NCCL_LIBRARY}")
  if(RSS_INSTALL)
    install(TARGETS rss_nccl EXPORT rssTargets)
  endif()
  message(STATUS "rss: NCCL ${RSS_NCCL_VERSION} found (${RSS_NCCL_LIBRARY}): rss::nccl and rss/sharded are available")
else()
  message(STATUS "rss: NCCL 2.28 or newer not found (headers: ${RSS_NCCL_INCLUDE_DIR}, library: ${RSS_NCCL_LIBRARY}, "
                 "version: '${RSS_NCCL_VERSION}'): rows sharded over GPUs are not built")
endif()
