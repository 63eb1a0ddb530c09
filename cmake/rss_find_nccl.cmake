# Finds NCCL 2.28 or newer (the device API and symmetric windows) for rows sharded over GPUs
# (include/rss/sharded): headers nccl.h + nccl_device.h and libnccl. Used by rss's own build (cmake/nccl.cmake)
# and, installed next to rssConfig.cmake, by a consumer's find_package(rss): NCCL is looked up on the machine
# that uses rss, never taken from the machine that installed it. Hints: NCCL_ROOT (CMake or environment
# variable), then the CUDA toolkit's folders, then the system's.
# Sets RSS_NCCL_FOUND, RSS_NCCL_VERSION and the cache entries RSS_NCCL_INCLUDE_DIR, RSS_NCCL_LIBRARY.
set(RSS_NCCL_FOUND OFF)
if(NOT TARGET CUDA::cudart)
  find_package(CUDAToolkit QUIET)
endif()

set(rss_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT})
if(CUDAToolkit_FOUND)
  list(APPEND rss_nccl_hints ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR})
  foreach(rss_nccl_dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
    get_filename_component(rss_nccl_parent "${rss_nccl_dir}" DIRECTORY)
    list(APPEND rss_nccl_hints "${rss_nccl_parent}")
  endforeach()
endif()

find_path(RSS_NCCL_INCLUDE_DIR nccl.h HINTS ${rss_nccl_hints} PATH_SUFFIXES include)
find_library(RSS_NCCL_LIBRARY NAMES nccl HINTS ${rss_nccl_hints} PATH_SUFFIXES lib lib64 lib/x64)

set(RSS_NCCL_VERSION "")
if(RSS_NCCL_INCLUDE_DIR AND EXISTS "${RSS_NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${RSS_NCCL_INCLUDE_DIR}/nccl.h" rss_nccl_version_lines REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  foreach(rss_nccl_part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${rss_nccl_part} ([0-9]+)" _ "${rss_nccl_version_lines}")
    set(rss_nccl_${rss_nccl_part} "${CMAKE_MATCH_1}")
  endforeach()
  if(NOT rss_nccl_MAJOR STREQUAL "")
    set(RSS_NCCL_VERSION "${rss_nccl_MAJOR}.${rss_nccl_MINOR}.${rss_nccl_PATCH}")
  endif()
endif()

if(RSS_NCCL_INCLUDE_DIR AND RSS_NCCL_LIBRARY AND EXISTS "${RSS_NCCL_INCLUDE_DIR}/nccl_device.h"
   AND RSS_NCCL_VERSION AND RSS_NCCL_VERSION VERSION_GREATER_EQUAL 2.28)
  set(RSS_NCCL_FOUND ON)
endif()
# This file is also included into the consumer's scope: leave only the results behind.
unset(rss_nccl_hints)
unset(rss_nccl_dir)
unset(rss_nccl_parent)
unset(rss_nccl_version_lines)
unset(rss_nccl_part)
unset(rss_nccl_MAJOR)
unset(rss_nccl_MINOR)
unset(rss_nccl_PATCH)
