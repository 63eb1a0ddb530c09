# Warns at configure time when no CUDA architecture the build compiles for is 90 (Hopper) or newer: rss's
# thread-block cluster kernels then have no machine code, and the host refuses them at run time instead.
# Where rss is a subproject or an installed package, the consumer's settings decide, possibly after
# add_subdirectory or find_package (CUDA enabled later, CMAKE_CUDA_ARCHITECTURES set later or left to CMake's
# default, the compiler's: sm_52 or sm_75), so the check runs once the top-level directory is done.
# Installed with the package: rssConfig.cmake schedules it too.
function(rss_check_cuda_architectures)
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(NOT "CUDA" IN_LIST languages)
    return()  # no CUDA sources, no rss kernels
  endif()
  set(archs "${CMAKE_CUDA_ARCHITECTURES}")
  foreach(arch IN LISTS archs)
    # all / all-major include 90 with every toolkit rss supports; native is the GPU of this machine: where it
    # is older than sm_90 there are no clusters to lose.
    if(arch MATCHES "^(all|all-major|native)$")
      return()
    endif()
    if(arch MATCHES "^([0-9]+)")  # 90, 90a, 90-real, 100f-virtual, ...
      if(CMAKE_MATCH_1 GREATER_EQUAL 90)
        return()
      endif()
    endif()
  endforeach()
  if(archs STREQUAL "" OR archs STREQUAL "OFF")
    set(archs "unset: the compiler's default")
  endif()
  message(WARNING "rss: CMAKE_CUDA_ARCHITECTURES (${archs}) has no architecture 90 or newer, so the thread-block "
    "cluster kernels get no machine code: strategy cluster_row, the backward's cluster_row and the sharded "
    "device path (nccl_device) return unsupported_device, and automatic never runs cluster_row (where it would, "
    "it runs its fallback: local_fusion forward, two_pass backward). Add 90 or newer for Hopper and later "
    "GPUs, e.g. -DCMAKE_CUDA_ARCHITECTURES=\"80;90\" (in a consumer: set it before project()).")
endfunction()

# Once per configuration, however many times rss is added or found, at the end of the top-level directory.
macro(rss_schedule_cuda_architectures_check)
  get_property(rss_arch_check_scheduled GLOBAL PROPERTY RSS_CUDA_ARCHITECTURES_CHECK)
  if(NOT rss_arch_check_scheduled)
    set_property(GLOBAL PROPERTY RSS_CUDA_ARCHITECTURES_CHECK ON)
    cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL rss_check_cuda_architectures)
  endif()
  unset(rss_arch_check_scheduled)
endmacro()
