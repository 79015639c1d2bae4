# VarflowMpi.cmake: libvarflow-mpi (include/varflow_mpi.h, src/mpi/), the
# companion library that runs one varflow program on many MPI ranks
# (docs/DISTRIBUTED.md). Included by the top CMakeLists.txt.
#
# VF_WITH_MPI=AUTO builds it when find_package(MPI) finds MPI for C, ON
# requires it, OFF never builds it. It stands on varflow's public API only,
# and links libvarflow: the static library with the static one, the shared
# with the shared (so one process has one engine core). Targets:
#   varflow_mpi_static, varflow_mpi_shared   (OUTPUT_NAME varflow-mpi)
#   varflow::mpi          in-tree: the static one; installed: the shared one
#   varflow::mpi_static   installed: the static one
# Sets VF_HAVE_MPI for the tests, examples and install rules.

set(VF_HAVE_MPI OFF)
if(NOT VF_WITH_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(VF_HAVE_MPI ON)
    message(STATUS "varflow: libvarflow-mpi on (MPI ${MPI_C_VERSION}, ${MPIEXEC_EXECUTABLE})")
  elseif(VF_WITH_MPI STREQUAL "ON")
    message(FATAL_ERROR "varflow: VF_WITH_MPI=ON but no MPI was found (Debian: apt-get install libopenmpi-dev openmpi-bin)")
  else()
    message(STATUS "varflow: libvarflow-mpi off (no MPI found; Debian: libopenmpi-dev openmpi-bin)")
  endif()
endif()

if(VF_HAVE_MPI)
  file(GLOB VF_MPI_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/mpi/*.c)
  add_library(varflow_mpi_objects OBJECT ${VF_MPI_SOURCES})
  # The record map (src/base/hashmap.c, libc only), compiled into the shared
  # library, hidden like the rest: libvarflow.so exports no vf__* symbol.
  # The static one takes libvarflow.a's copy: with one in each archive, a
  # link of both whole (--whole-archive, to bundle them into one plugin)
  # failed on the duplicates (found by a user tester).
  add_library(varflow_mpi_map OBJECT ${PROJECT_SOURCE_DIR}/src/base/hashmap.c)
  foreach(o varflow_mpi_objects varflow_mpi_map)
    set_target_properties(${o} PROPERTIES
      POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
    target_include_directories(${o} PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>)
    target_include_directories(${o} PRIVATE ${PROJECT_SOURCE_DIR}/src)
    target_compile_definitions(${o} PRIVATE _GNU_SOURCE VF_BUILDING)
    target_link_libraries(${o} PRIVATE vf_build_flags MPI::MPI_C
                          Threads::Threads)
  endforeach()

  add_library(varflow_mpi_static STATIC $<TARGET_OBJECTS:varflow_mpi_objects>)
  add_library(varflow_mpi_shared SHARED $<TARGET_OBJECTS:varflow_mpi_objects>
                                        $<TARGET_OBJECTS:varflow_mpi_map>)
  target_link_libraries(varflow_mpi_static PUBLIC varflow_static MPI::MPI_C)
  target_link_libraries(varflow_mpi_shared PUBLIC varflow_shared MPI::MPI_C)
  foreach(t varflow_mpi_static varflow_mpi_shared)
    set_target_properties(${t} PROPERTIES OUTPUT_NAME varflow-mpi)
    target_include_directories(${t} PUBLIC
      $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    target_link_libraries(${t} PUBLIC Threads::Threads)
  endforeach()
  # Installed beside libvarflow.so: $ORIGIN finds it there even when the
  # program does not link libvarflow itself or the prefix is not a system one.
  set_target_properties(varflow_mpi_shared PROPERTIES VERSION ${PROJECT_VERSION}
                        SOVERSION ${VF_SOVERSION} EXPORT_NAME mpi
                        INSTALL_RPATH "$ORIGIN")
  set_target_properties(varflow_mpi_static PROPERTIES EXPORT_NAME mpi_static)
  if(VF_HAVE_VERSION_SCRIPT)
    target_link_options(varflow_mpi_shared PRIVATE "-Wl,--version-script=${VF_EXPORT_MAP}")
  endif()
  add_library(varflow::mpi ALIAS varflow_mpi_static)
  add_library(varflow::mpi_static ALIAS varflow_mpi_static)
  add_library(varflow::mpi_shared ALIAS varflow_mpi_shared)
endif()
