# VarflowCuda.cmake: libvarflow-cuda (include/varflow_cuda.h,
# src/device/cuda.c), the CUDA device class in a library of its own, so that
# libvarflow needs libc and pthreads only whatever the build machine has.
# Included by the top CMakeLists.txt.
#
# VF_WITH_CUDA=AUTO builds it when find_package(CUDAToolkit) finds the
# toolkit (CUDA_HOME is honoured), ON requires it, OFF never builds it. It
# links the CUDA runtime (CUDA::cudart, privately: varflow_cuda.h needs
# nothing of CUDA) and libvarflow: the static library with the static one,
# the shared with the shared (so one process has one table of device
# classes). A program calls vf_cuda_register() to hand the class to the
# core (src/device/device.h, vf__device_class_register). Targets, as
# libvarflow-mpi's:
#   varflow_cuda_static, varflow_cuda_shared   (OUTPUT_NAME varflow-cuda)
#   varflow::cuda          in-tree: the static one; installed: the shared one
#   varflow::cuda_static   installed: the static one
# Sets VF_HAVE_CUDA for the tests, examples and install rules.

set(VF_HAVE_CUDA OFF)
if(NOT VF_WITH_CUDA STREQUAL "OFF")
  if(NOT DEFINED CUDAToolkit_ROOT AND DEFINED ENV{CUDA_HOME})
    set(CUDAToolkit_ROOT $ENV{CUDA_HOME})
  endif()
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(VF_HAVE_CUDA ON)
    message(STATUS "varflow: libvarflow-cuda on (CUDA ${CUDAToolkit_VERSION}, ${CUDAToolkit_LIBRARY_DIR})")
  elseif(VF_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "varflow: VF_WITH_CUDA=ON but no CUDA toolkit was found (set CUDA_HOME or CUDAToolkit_ROOT)")
  else()
    message(STATUS "varflow: libvarflow-cuda off (no CUDA toolkit found)")
  endif()
endif()

if(VF_HAVE_CUDA)
  add_library(varflow_cuda_objects OBJECT ${PROJECT_SOURCE_DIR}/src/device/cuda.c)
  set_target_properties(varflow_cuda_objects PROPERTIES
    POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
  target_include_directories(varflow_cuda_objects PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>)
  target_include_directories(varflow_cuda_objects PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_definitions(varflow_cuda_objects PRIVATE _GNU_SOURCE VF_BUILDING)
  target_link_libraries(varflow_cuda_objects PRIVATE vf_build_flags CUDA::cudart
                        Threads::Threads)

  add_library(varflow_cuda_static STATIC $<TARGET_OBJECTS:varflow_cuda_objects>)
  add_library(varflow_cuda_shared SHARED $<TARGET_OBJECTS:varflow_cuda_objects>)
  target_link_libraries(varflow_cuda_static PUBLIC varflow_static)
  target_link_libraries(varflow_cuda_shared PUBLIC varflow_shared)
  foreach(t varflow_cuda_static varflow_cuda_shared)
    set_target_properties(${t} PROPERTIES OUTPUT_NAME varflow-cuda)
    target_include_directories(${t} PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_link_libraries(${t} PUBLIC Threads::Threads PRIVATE CUDA::cudart)
  endforeach()
  # Installed beside libvarflow.so: $ORIGIN finds it there even when the
  # program does not link libvarflow itself or the prefix is not a system one.
  set_target_properties(varflow_cuda_shared PROPERTIES VERSION ${PROJECT_VERSION}
                        SOVERSION ${VF_SOVERSION} EXPORT_NAME cuda
                        INSTALL_RPATH "$ORIGIN")
  set_target_properties(varflow_cuda_static PROPERTIES EXPORT_NAME cuda_static)
  if(VF_HAVE_VERSION_SCRIPT)
    set(VF_CUDA_EXPORT_MAP ${PROJECT_SOURCE_DIR}/cmake/varflow-cuda.map)
    target_link_options(varflow_cuda_shared PRIVATE
                        "-Wl,--version-script=${VF_CUDA_EXPORT_MAP}")
    set_property(TARGET varflow_cuda_shared APPEND PROPERTY LINK_DEPENDS
                 ${VF_CUDA_EXPORT_MAP})
  endif()
  add_library(varflow::cuda ALIAS varflow_cuda_static)
  add_library(varflow::cuda_static ALIAS varflow_cuda_static)
  add_library(varflow::cuda_shared ALIAS varflow_cuda_shared)
endif()
