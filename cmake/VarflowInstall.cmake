# VarflowInstall.cmake: install rules, included by the top CMakeLists.txt.
#
# Installs (GNUInstallDirs layout, relative to the install prefix):
#   include/varflow.h, include/varflow.hpp (the C++ layer, header-only)
#   lib/libvarflow.a, lib/libvarflow.so{,.MAJOR,.MAJOR.MINOR.PATCH}
#   lib/pkgconfig/varflow.pc                       (pkg-config)
#   lib/cmake/varflow/varflow{Config,ConfigVersion,Targets*}.cmake
# Components: Runtime (the .so.MAJOR files) and Development (the rest).
# `cmake --install BUILD --prefix DIR` works whatever CMAKE_INSTALL_PREFIX
# was at configure time (the CMake package is relocatable; varflow.pc is
# written at install time), and DESTDIR is honoured.

include(CMakePackageConfigHelpers)

set(VF_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/varflow)
set(VF_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(FILES ${PROJECT_SOURCE_DIR}/include/varflow.h
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
# link libraries of the library targets here when they grow).
set(VF_PC_LIBS_PRIVATE "-pthread")
if(VF_HAVE_CUDA)
  string(APPEND VF_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcudart")
endif()
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
