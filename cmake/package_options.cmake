# How the library is linked, for packages (the Python wheel, `cmake --install`). The defaults keep
# the development build as it was: a static libflashcore, the shared CUDA runtime.
#
#   FLASHCORE_SHARED            libflashcore as a shared library that exports the C++ API (flashcore::*
#                               symbols only, cmake/libflashcore.map): libflashcore_c and the CLI then
#                               link it, so the kernels exist once in a package. The wheel sets it.
#   FLASHCORE_CUDART_STATIC     link the CUDA runtime statically: nothing of the CUDA toolkit is needed
#                               where the library runs, only the driver. The wheel sets it.
#   FLASHCORE_STATIC_LIBSTDCXX  link libstdc++ statically into libflashcore, libflashcore_c and the CLI,
#                               so they load on Linux systems with an older libstdc++ than the build
#                               machine's (manylinux wheels). The wheel sets it.
#   FLASHCORE_INSTALL           generate install rules (default: when flashcore is the top-level project)
include(GNUInstallDirs)

option(FLASHCORE_SHARED "Build libflashcore as a shared library (exports only the flashcore:: C++ API)" OFF)
option(FLASHCORE_CUDART_STATIC "Link the CUDA runtime statically" OFF)
option(FLASHCORE_STATIC_LIBSTDCXX "Link libstdc++ statically into the shared libraries and the CLI" OFF)
option(FLASHCORE_INSTALL "Generate flashcore's install rules and CMake package" ${PROJECT_IS_TOP_LEVEL})

if(FLASHCORE_SHARED)
  set(FLASHCORE_LIBRARY_TYPE SHARED)
else()
  set(FLASHCORE_LIBRARY_TYPE STATIC)
endif()
if(FLASHCORE_CUDART_STATIC)
  set(FLASHCORE_CUDART CUDA::cudart_static)
else()
  set(FLASHCORE_CUDART CUDA::cudart)
endif()
