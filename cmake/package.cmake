# Packaging: what a program that uses flashcore sees, however it gets it.
#   - add_subdirectory / FetchContent: the targets flashcore::flashcore (the C++ API),
#     flashcore::flashcore_c (the C ABI, a shared library) and flashcore::accuracy (flashcore/accuracy.h).
#   - `cmake --install`: headers, the libraries, the `flashcore` CLI and a CMake package
#     (find_package(flashcore) → the same targets, from flashcoreTargets.cmake).
#   - The Python wheel (scikit-build-core, install component "python"): libflashcore_c, libflashcore
#     when shared, and the CLI inside the flashcore package folder.
# Also generates flashcore/version.h and what build_info.cpp reports (the kernel families built).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

add_library(flashcore::flashcore ALIAS flashcore)
add_library(flashcore::flashcore_c ALIAS flashcore_c)
add_library(flashcore::accuracy ALIAS flashcore_accuracy)

# --- Generated headers ---------------------------------------------------------------------------
configure_file("${CMAKE_CURRENT_LIST_DIR}/version.h.in" "${PROJECT_BINARY_DIR}/include/flashcore/version.h" @ONLY)
target_include_directories(flashcore PUBLIC $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>)

# "80-real;90" -> "sm_80 sm_90 compute_90": CMake's architecture list as the code it produces
# (SASS for sm_XX, PTX for compute_XX).
function(flashcore_architecture_names out archs)
  set(_names)
  foreach(_arch IN LISTS archs)
    if(_arch MATCHES "^([0-9]+[a-z]?)-real$")
      list(APPEND _names "sm_${CMAKE_MATCH_1}")
    elseif(_arch MATCHES "^([0-9]+[a-z]?)-virtual$")
      list(APPEND _names "compute_${CMAKE_MATCH_1}")
    elseif(_arch MATCHES "^([0-9]+[a-z]?)$")
      list(APPEND _names "sm_${CMAKE_MATCH_1}" "compute_${CMAKE_MATCH_1}")
    else()
      list(APPEND _names "${_arch}")
    endif()
  endforeach()
  string(JOIN " " _joined ${_names})
  set(${out} "${_joined}" PARENT_SCOPE)
endfunction()

# src/cuda/CMakeLists.txt records each kernel family it builds in this global property.
get_property(_families GLOBAL PROPERTY FLASHCORE_BUILT_KERNEL_FAMILIES)
set(_family_archs)
foreach(_family IN LISTS _families)
  flashcore_architecture_names(_names "${FLASHCORE_ARCHS_${_family}}")
  list(APPEND _family_archs "${_family}: ${_names}")
endforeach()
string(JOIN " " FLASHCORE_BUILD_KERNEL_FAMILIES ${_families})
string(JOIN "; " FLASHCORE_BUILD_CUDA_ARCHITECTURES ${_family_archs})
set(FLASHCORE_BUILD_CUDA_VERSION "")
if(FLASHCORE_WITH_CUDA)
  set(FLASHCORE_BUILD_CUDA_VERSION "${CUDAToolkit_VERSION}")
endif()
set(FLASHCORE_BUILD_CUDART_STATIC 0)
if(FLASHCORE_WITH_CUDA AND FLASHCORE_CUDART_STATIC)
  set(FLASHCORE_BUILD_CUDART_STATIC 1)
endif()
configure_file("${CMAKE_CURRENT_LIST_DIR}/build_config.h.in" "${PROJECT_BINARY_DIR}/generated/flashcore_build_config.h" @ONLY)
target_include_directories(flashcore PRIVATE "${PROJECT_BINARY_DIR}/generated")
if(FLASHCORE_WITH_CUDA)
  message(STATUS "flashcore: GPU kernel families in this build: ${FLASHCORE_BUILD_CUDA_ARCHITECTURES}")
endif()

# --- Linking for packages (cmake/package_options.cmake) -------------------------------------------
set(_packaged_binaries flashcore_c)
if(TARGET flashcore_cli)
  list(APPEND _packaged_binaries flashcore_cli)
endif()
if(FLASHCORE_SHARED)
  list(APPEND _packaged_binaries flashcore)
  target_link_options(flashcore PRIVATE "LINKER:--version-script=${CMAKE_CURRENT_LIST_DIR}/libflashcore.map")
  set_property(TARGET flashcore APPEND PROPERTY LINK_DEPENDS "${CMAKE_CURRENT_LIST_DIR}/libflashcore.map")
endif()
# libgcc stays shared (libgcc_s.so.1 is on every manylinux system): its static unwinder would need
# glibc 2.35's _dl_find_object.
if(FLASHCORE_STATIC_LIBSTDCXX)
  foreach(_target IN LISTS _packaged_binaries)
    target_link_options(${_target} PRIVATE -static-libstdc++)
    target_sources(${_target} PRIVATE "${CMAKE_CURRENT_LIST_DIR}/glibc_compat.cpp")
  endforeach()
endif()
# Installed copies find libflashcore (when shared) next to them: lib/ for `cmake --install`, the
# package folder in the wheel (the CLI sits in its bin/).
file(RELATIVE_PATH _bin_to_lib "${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}" "${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}")
set_property(TARGET flashcore_c APPEND PROPERTY INSTALL_RPATH "$ORIGIN")
if(TARGET flashcore_cli)
  set_property(TARGET flashcore_cli APPEND PROPERTY INSTALL_RPATH "$ORIGIN/${_bin_to_lib}" "$ORIGIN/..")
endif()

# --- The Python wheel ----------------------------------------------------------------------------
if(SKBUILD)
  set(_wheel_libraries flashcore_c)
  if(FLASHCORE_SHARED)
    list(APPEND _wheel_libraries flashcore)
  endif()
  install(TARGETS ${_wheel_libraries} LIBRARY DESTINATION flashcore COMPONENT python)
  if(TARGET flashcore_cli)
    install(TARGETS flashcore_cli RUNTIME DESTINATION flashcore/bin COMPONENT python)
  endif()
endif()

# --- cmake --install and the CMake package -------------------------------------------------------
if(NOT FLASHCORE_INSTALL)
  return()
endif()
set(FLASHCORE_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/flashcore" CACHE STRING
    "Where cmake --install puts flashcoreConfig.cmake (relative to the prefix)")
install(TARGETS flashcore flashcore_c flashcore_accuracy EXPORT flashcoreTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/flashcore" "${PROJECT_BINARY_DIR}/include/flashcore"
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development FILES_MATCHING PATTERN "*.h")
if(TARGET flashcore_cli)
  install(TARGETS flashcore_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
endif()
install(EXPORT flashcoreTargets NAMESPACE flashcore:: DESTINATION ${FLASHCORE_INSTALL_CMAKEDIR}
  COMPONENT development)

# A static libflashcore with CUDA inside needs the CUDA runtime at the consumer's link.
set(FLASHCORE_CONFIG_NEEDS_CUDATOOLKIT OFF)
if(FLASHCORE_WITH_CUDA AND NOT FLASHCORE_SHARED)
  set(FLASHCORE_CONFIG_NEEDS_CUDATOOLKIT ON)
endif()
configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/flashcoreConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/flashcoreConfig.cmake" INSTALL_DESTINATION ${FLASHCORE_INSTALL_CMAKEDIR})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/flashcoreConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/flashcoreConfig.cmake" "${PROJECT_BINARY_DIR}/flashcoreConfigVersion.cmake"
  DESTINATION ${FLASHCORE_INSTALL_CMAKEDIR} COMPONENT development)
