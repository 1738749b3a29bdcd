# Install rules: the public headers, libquilt (SONAME libquilt.so.MAJOR.MINOR), the quilt CLI,
# the OpenCL plugin in <libdir>/quilt-backends (where libquilt and the CLI look), the CMake
# package (find_package(Quilt): Quilt::quilt, Quilt::backend) and quilt.pc for pkg-config.
# Everything is relocatable: `cmake --install build --prefix P` works for any P.
include(CMakePackageConfigHelpers)

set(QUILT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Quilt)

install(FILES include/quilt/quilt.hpp include/quilt/backend.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/quilt COMPONENT Development)
install(TARGETS quilt quilt_backend EXPORT QuiltTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime
                NAMELINK_COMPONENT Development
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS quilt_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime)
if(TARGET quilt_opencl)
  install(TARGETS quilt_opencl LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/quilt-backends
          COMPONENT Runtime)
endif()

install(EXPORT QuiltTargets NAMESPACE Quilt:: DESTINATION ${QUILT_CMAKE_DIR}
        COMPONENT Development)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/QuiltConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/QuiltConfig.cmake
                              INSTALL_DESTINATION ${QUILT_CMAKE_DIR}
                              PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_BINDIR)
# While the major version is 0 a minor version may break the API, as the SONAME says.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(QUILT_COMPATIBILITY SameMinorVersion)
else()
  set(QUILT_COMPATIBILITY SameMajorVersion)
endif()
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/QuiltConfigVersion.cmake
                                 COMPATIBILITY ${QUILT_COMPATIBILITY})
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/QuiltConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/QuiltConfigVersion.cmake
        DESTINATION ${QUILT_CMAKE_DIR} COMPONENT Development)

# quilt.pc, relocatable: the prefix is found from where the file is.
set(QUILT_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH QUILT_PC_TO_PREFIX ${CMAKE_INSTALL_PREFIX}/${QUILT_PC_DIR} ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" QUILT_PC_TO_PREFIX "${QUILT_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/quilt.pc.in ${CMAKE_CURRENT_BINARY_DIR}/quilt.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/quilt.pc DESTINATION ${QUILT_PC_DIR}
        COMPONENT Development)
