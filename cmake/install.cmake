# `cmake --install`: public headers, the layer libraries, the `kiln` binary, a CMake package (kilnConfig.cmake
# with kiln::runtime for running engines and kiln::kiln for everything) and pkg-config files.
include(CMakePackageConfigHelpers)

set(kiln_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)

# kiln::kiln: the builder API and everything below it.
add_library(kiln_all INTERFACE)
target_link_libraries(kiln_all INTERFACE kiln_api)
set_target_properties(kiln_all PROPERTIES EXPORT_NAME kiln)
install(TARGETS kiln_all EXPORT kilnTargets)
# kiln::runtime is the kiln_runtime layer itself (its EXPORT_NAME).

install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/kiln DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(TARGETS kiln RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${kiln_cmake_dir})

configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/package/kilnConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/package/kilnConfig.cmake INSTALL_DESTINATION ${kiln_cmake_dir})
# Pre-1.0 only the same minor version is compatible (the ABI and the engine format change between them).
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/kilnConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/package/kilnConfig.cmake ${CMAKE_BINARY_DIR}/package/kilnConfigVersion.cmake
        DESTINATION ${kiln_cmake_dir})

# pkg-config: kiln (everything) and kiln-runtime (running engines only).
set(KILN_PC_RUNTIME_LIBS "-lkiln_runtime -lkiln_kernels -lkiln_graph -lkiln_ops -lkiln_core")
set(KILN_PC_ALL_LIBS "-lkiln_api -lkiln_builder -lkiln_passes -lkiln_onnx ${KILN_PC_RUNTIME_LIBS}")
# The prefix relative to the .pc file, so a moved install (or `cmake --install --prefix`) stays right.
file(RELATIVE_PATH KILN_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
foreach(pc kiln kiln-runtime)
  configure_file(${CMAKE_SOURCE_DIR}/cmake/package/${pc}.pc.in ${CMAKE_BINARY_DIR}/package/${pc}.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/package/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
