# Optional NCCL (2.28 or newer: the device API and symmetric windows) for rows sharded over GPUs
# (include/rss/sharded). Where cmake/rss_find_nccl.cmake finds it, this defines RSS_NCCL_FOUND and the
# INTERFACE target rss::nccl (rss::rss plus NCCL); elsewhere nothing, and the single-GPU library is unchanged.
# rss::nccl is not exported: the installed rssConfig.cmake finds NCCL again on the consumer's machine.
include(${CMAKE_CURRENT_LIST_DIR}/rss_find_nccl.cmake)

if(RSS_NCCL_FOUND)
  add_library(rss_nccl INTERFACE)
  add_library(rss::nccl ALIAS rss_nccl)
  target_include_directories(rss_nccl SYSTEM INTERFACE "${RSS_NCCL_INCLUDE_DIR}")
  target_link_libraries(rss_nccl INTERFACE rss "${RSS_NCCL_LIBRARY}")
  message(STATUS "rss: NCCL ${RSS_NCCL_VERSION} found (${RSS_NCCL_LIBRARY}): rss::nccl and rss/sharded are available")
else()
  message(STATUS "rss: NCCL 2.28 or newer not found (headers: ${RSS_NCCL_INCLUDE_DIR}, library: ${RSS_NCCL_LIBRARY}, "
                 "version: '${RSS_NCCL_VERSION}'): rows sharded over GPUs are not built")
endif()
