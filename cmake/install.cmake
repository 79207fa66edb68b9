# `cmake --install BUILD [--prefix DIR]`: the public headers (include/qdeploy/), the static libraries, the CLI, a CMake
# package (find_package(qdeploy) -> qdeploy::qdeploy) and a pkg-config file (qdeploy.pc). docs/cpp-api.md#linking.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(QD_INSTALL_TARGETS qdeploy_api qdeploy_frontend qdeploy_lib qd_onnx_proto)
if(QD_HAVE_CUDA)
  list(APPEND QD_INSTALL_TARGETS qdeploy_cuda)
endif()
install(TARGETS ${QD_INSTALL_TARGETS} EXPORT qdeployTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/qdeploy DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
set(QD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/qdeploy)
install(EXPORT qdeployTargets NAMESPACE qdeploy:: DESTINATION ${QD_CMAKE_DIR})

# What the exported targets link: the package finds the same dependencies again.
set(QD_CONFIG_DEPS "find_dependency(Threads)\nfind_dependency(Protobuf)\nfind_dependency(nlohmann_json)\n")
if(NOT QD_STATIC)
  string(APPEND QD_CONFIG_DEPS "find_dependency(JPEG)\nfind_dependency(PNG)\nfind_dependency(ZLIB)\n")
endif()
if(QD_HAVE_CUDA)
  string(APPEND QD_CONFIG_DEPS "find_dependency(CUDAToolkit)\n")
endif()
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/qdeployConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/qdeployConfig.cmake INSTALL_DESTINATION ${QD_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/qdeployConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/qdeployConfig.cmake ${CMAKE_BINARY_DIR}/qdeployConfigVersion.cmake
        DESTINATION ${QD_CMAKE_DIR})

# pkg-config: static libraries, so Libs lists every dependency, each library before the ones it uses.
set(QD_PC_LIBS "-lqdeploy_frontend -lqdeploy_lib")
if(QD_HAVE_CUDA)
  set(QD_PC_LIBS "-lqdeploy_frontend -lqdeploy_cuda -lqdeploy_lib")
endif()
string(APPEND QD_PC_LIBS " -lqd_onnx_proto")
set(QD_PC_DEPS ${Protobuf_LIBRARIES})
if(QD_STATIC)
  list(APPEND QD_PC_DEPS ${QD_IMAGE_LIBS})
else()
  list(APPEND QD_PC_DEPS ${JPEG_LIBRARIES} ${PNG_LIBRARY} ${ZLIB_LIBRARIES})
endif()
list(APPEND QD_PC_DEPS ${QD_BLAS_LIBS})
if(QD_HAVE_CUDA)
  list(APPEND QD_PC_DEPS ${CUDA_cudart_static_LIBRARY} -lrt)
endif()
foreach(lib ${QD_PC_DEPS})
  if(lib MATCHES "^-")
    string(APPEND QD_PC_LIBS " ${lib}")
  elseif(NOT lib MATCHES "^(optimized|debug|general)$")
    string(APPEND QD_PC_LIBS " ${lib}")
  endif()
endforeach()
string(APPEND QD_PC_LIBS " -lpthread")
foreach(lib ${CMAKE_DL_LIBS})
  string(APPEND QD_PC_LIBS " -l${lib}")
endforeach()
list(JOIN QD_PC_LIBS " " QD_PC_LIBS)
# The prefix from the file's own place, so that `cmake --install --prefix DIR` gives a working file.
file(RELATIVE_PATH QD_PC_UP /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
configure_file(${CMAKE_SOURCE_DIR}/cmake/qdeploy.pc.in ${CMAKE_BINARY_DIR}/qdeploy.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/qdeploy.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
