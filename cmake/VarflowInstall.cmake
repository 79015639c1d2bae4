# VarflowInstall.cmake: install rules, included by the top CMakeLists.txt.
#
# Installs (GNUInstallDirs layout, relative to the install prefix):
#   include/varflow.h, include/varflow_profile.h (the profiler and its
#   analysis), include/varflow.hpp (the C++ layer, header-only)
#   lib/libvarflow.a, lib/libvarflow.so{,.MAJOR,.MAJOR.MINOR.PATCH}
#   lib/pkgconfig/varflow.pc                       (pkg-config)
#   lib/cmake/varflow/varflow{Config,ConfigVersion,Targets*}.cmake
# and, when libvarflow-mpi is built (VF_HAVE_MPI, cmake/VarflowMpi.cmake):
#   include/varflow_mpi.h
#   lib/libvarflow-mpi.a, lib/libvarflow-mpi.so{,.MAJOR,.MAJOR.MINOR.PATCH}
#   lib/pkgconfig/varflow-mpi.pc                   (Requires: varflow)
#   varflow::mpi (shared) and varflow::mpi_static in the same CMake package
# and, when libvarflow-cuda is built (VF_HAVE_CUDA, cmake/VarflowCuda.cmake):
#   include/varflow_cuda.h
#   lib/libvarflow-cuda.a, lib/libvarflow-cuda.so{,.MAJOR,.MAJOR.MINOR.PATCH}
#   lib/pkgconfig/varflow-cuda.pc                  (Requires: varflow)
#   varflow::cuda (shared) and varflow::cuda_static in the same CMake package
# Components: Runtime (the .so.MAJOR files) and Development (the rest).
# `cmake --install BUILD --prefix DIR` works whatever CMAKE_INSTALL_PREFIX
# was at configure time (the CMake package is relocatable; varflow.pc is
# written at install time), and DESTDIR is honoured.

include(CMakePackageConfigHelpers)

set(VF_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/varflow)
set(VF_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(FILES ${PROJECT_SOURCE_DIR}/include/varflow.h
              ${PROJECT_SOURCE_DIR}/include/varflow_profile.h
              ${PROJECT_SOURCE_DIR}/include/varflow.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT Development)

install(TARGETS varflow_shared varflow_static varflow_cxx EXPORT varflowTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime
          NAMELINK_COMPONENT Development
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# pkg-config -----------------------------------------------------------------
# The prefix written into varflow.pc is the one given at *install* time
# (`cmake --install --prefix DIR`, `make install PREFIX=DIR`), not the
# configure-time CMAKE_INSTALL_PREFIX: the file is generated in two steps,
# the second one inside the install script. Absolute paths, so pkg-config
# recognizes and drops system directories such as -I/usr/include.
foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(VF_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(VF_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
# What a static link needs besides libvarflow.a (mirror the PUBLIC/PRIVATE
# link libraries of the library targets here when they grow): pthreads
# only, whatever this machine has (the CUDA runtime is libvarflow-cuda's).
set(VF_PC_LIBS_PRIVATE "-pthread")
set(VF_PC_PREFIX "@VF_PC_PREFIX@") # filled in at install time
if(IS_ABSOLUTE "${VF_PC_DIR}")
  set(vf_pc_dest "${VF_PC_DIR}")
else()
  set(vf_pc_dest "\${CMAKE_INSTALL_PREFIX}/${VF_PC_DIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/varflow.pc.in
               ${PROJECT_BINARY_DIR}/varflow.pc.in @ONLY)
install(CODE "
  set(VF_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${PROJECT_BINARY_DIR}/varflow.pc.in\"
                 \"${PROJECT_BINARY_DIR}/pkgconfig/varflow.pc\" @ONLY)
  file(INSTALL DESTINATION \"${vf_pc_dest}\"
       TYPE FILE FILES \"${PROJECT_BINARY_DIR}/pkgconfig/varflow.pc\")
" COMPONENT Development)

# libvarflow-mpi -----------------------------------------------------------------
# Same layout and components as libvarflow, the same export set (so one
# find_package(varflow) offers varflow::mpi and varflow::mpi_static), and a
# pkg-config file of its own, written at install time like varflow.pc.
if(VF_HAVE_MPI)
  install(FILES ${PROJECT_SOURCE_DIR}/include/varflow_mpi.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT Development)
  install(TARGETS varflow_mpi_shared varflow_mpi_static EXPORT varflowTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime
            NAMELINK_COMPONENT Development
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

  # MPI's flags in varflow-mpi.pc (varflow_mpi.h includes mpi.h, and a
  # program that calls vf_mpi_create passes MPI_COMM_WORLD, so they are public:
  # Cflags and Libs, not .private). They are written out from what
  # find_package(MPI) found, the MPI this library was compiled and linked
  # against, rather than as `Requires: ompi-c`, even where pkg-config knows
  # ompi-c: that module name is Open MPI's alone (MPICH's is mpich, vendor
  # MPIs and compiler wrappers often ship none); the MPI pkg-config knows
  # need not be the one FindMPI took from mpicc (with Open MPI and MPICH both
  # installed, Debian's mpicc alternative may pick MPICH, and the two differ
  # in ABI: MPI_Comm is a pointer in one and an int in the other); and a
  # Requires on it fails the whole varflow-mpi module wherever MPI's .pc
  # directory is not on PKG_CONFIG_PATH (an MPI under /opt, loaded as an
  # environment module). The cost: the paths are those of the build machine,
  # as in the library's own link; rebuild varflow when MPI moves.
  set(VF_PC_MPI_CFLAGS "")
  foreach(opt IN LISTS MPI_C_COMPILE_OPTIONS)
    string(REGEX REPLACE "^SHELL:" "" opt "${opt}")
    string(APPEND VF_PC_MPI_CFLAGS " ${opt}")
  endforeach()
  foreach(def IN LISTS MPI_C_COMPILE_DEFINITIONS)
    string(APPEND VF_PC_MPI_CFLAGS " -D${def}")
  endforeach()
  foreach(dir IN LISTS MPI_C_INCLUDE_DIRS)
    string(APPEND VF_PC_MPI_CFLAGS " -I${dir}")
  endforeach()
  set(VF_PC_MPI_LIBS "")
  if(MPI_C_LINK_FLAGS)
    string(APPEND VF_PC_MPI_LIBS " ${MPI_C_LINK_FLAGS}")
  endif()
  # A library found as a file (/dir/libmpi.so) becomes -L/dir -lmpi, as
  # mpicc --showme:link writes it; anything else goes as it is.
  foreach(lib IN LISTS MPI_C_LIBRARIES)
    get_filename_component(lib_name "${lib}" NAME)
    if(IS_ABSOLUTE "${lib}" AND lib_name MATCHES "^lib(.+)\\.(so|dylib)$")
      get_filename_component(lib_dir "${lib}" DIRECTORY)
      string(APPEND VF_PC_MPI_LIBS " -L${lib_dir} -l${CMAKE_MATCH_1}")
    elseif(IS_ABSOLUTE "${lib}" OR lib MATCHES "^-")
      string(APPEND VF_PC_MPI_LIBS " ${lib}")
    else()
      string(APPEND VF_PC_MPI_LIBS " -l${lib}")
    endif()
  endforeach()
  configure_file(${PROJECT_SOURCE_DIR}/cmake/varflow-mpi.pc.in
                 ${PROJECT_BINARY_DIR}/varflow-mpi.pc.in @ONLY)
  install(CODE "
    set(VF_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${PROJECT_BINARY_DIR}/varflow-mpi.pc.in\"
                   \"${PROJECT_BINARY_DIR}/pkgconfig/varflow-mpi.pc\" @ONLY)
    file(INSTALL DESTINATION \"${vf_pc_dest}\"
         TYPE FILE FILES \"${PROJECT_BINARY_DIR}/pkgconfig/varflow-mpi.pc\")
  " COMPONENT Development)
endif()
# scripts/check-install reads this from the cache to check the MPI part.
set(VF_HAVE_MPI ${VF_HAVE_MPI} CACHE INTERNAL "libvarflow-mpi is built and installed")

# libvarflow-cuda ----------------------------------------------------------------
# As libvarflow-mpi: same layout, components and export set (varflow::cuda
# and varflow::cuda_static), and varflow-cuda.pc. varflow_cuda.h needs
# nothing of CUDA, so Cflags are varflow's; the CUDA runtime the library was
# linked with is Libs.private (a static link needs it; the shared library
# records it in its NEEDED entries). The path is the build machine's, as in
# the library's own link.
if(VF_HAVE_CUDA)
  install(FILES ${PROJECT_SOURCE_DIR}/include/varflow_cuda.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT Development)
  install(TARGETS varflow_cuda_shared varflow_cuda_static EXPORT varflowTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime
            NAMELINK_COMPONENT Development
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  set(VF_PC_CUDA_LIBS_PRIVATE "-L${CUDAToolkit_LIBRARY_DIR} -lcudart -pthread")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/varflow-cuda.pc.in
                 ${PROJECT_BINARY_DIR}/varflow-cuda.pc.in @ONLY)
  install(CODE "
    set(VF_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${PROJECT_BINARY_DIR}/varflow-cuda.pc.in\"
                   \"${PROJECT_BINARY_DIR}/pkgconfig/varflow-cuda.pc\" @ONLY)
    file(INSTALL DESTINATION \"${vf_pc_dest}\"
         TYPE FILE FILES \"${PROJECT_BINARY_DIR}/pkgconfig/varflow-cuda.pc\")
  " COMPONENT Development)
endif()
# scripts/check-install reads this from the cache to check the CUDA part.
set(VF_HAVE_CUDA ${VF_HAVE_CUDA} CACHE INTERNAL "libvarflow-cuda is built and installed")

# CMake package ----------------------------------------------------------------
install(EXPORT varflowTargets NAMESPACE varflow::
        DESTINATION ${VF_CMAKE_DIR} COMPONENT Development)
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/varflowConfig.cmake.in
  ${PROJECT_BINARY_DIR}/varflowConfig.cmake
  INSTALL_DESTINATION ${VF_CMAKE_DIR})
# 0.x releases make no promise across minor versions; from 1.0 on, the
# major version is the compatibility line.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(vf_compat SameMinorVersion)
else()
  set(vf_compat SameMajorVersion)
endif()
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/varflowConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${vf_compat})
install(FILES ${PROJECT_BINARY_DIR}/varflowConfig.cmake
              ${PROJECT_BINARY_DIR}/varflowConfigVersion.cmake
        DESTINATION ${VF_CMAKE_DIR} COMPONENT Development)
