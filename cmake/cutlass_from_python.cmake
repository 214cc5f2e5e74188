# Sets FLASHCORE_PYTHON_CUTLASS_INCLUDE to the CuTe/CUTLASS headers that PyPI's nvidia-cutlass wheel
# ships (cutlass_library/source/include) in the Python that runs the build, or to "" when it has
# none. The Python is the one scikit-build-core names (Python_EXECUTABLE / Python3_EXECUTABLE:
# pip's isolated build environment, where nvidia-cutlass is a build requirement), else python3 on
# PATH. The package is located, not imported: importing cutlass_library would need its dependencies.
set(FLASHCORE_PYTHON_CUTLASS_INCLUDE "")
set(_flashcore_python "")
foreach(_var IN ITEMS Python3_EXECUTABLE Python_EXECUTABLE)
  if(NOT _flashcore_python AND ${_var})
    set(_flashcore_python "${${_var}}")
  endif()
endforeach()
if(NOT _flashcore_python)
  find_program(_flashcore_python_found NAMES python3 python)
  if(_flashcore_python_found)
    set(_flashcore_python "${_flashcore_python_found}")
  endif()
endif()
if(_flashcore_python)
  execute_process(
    COMMAND "${_flashcore_python}" -c
            "import importlib.util, os; s = importlib.util.find_spec('cutlass_library'); print(os.path.join(list(s.submodule_search_locations)[0], 'source', 'include') if s else '')"
    OUTPUT_VARIABLE _flashcore_cutlass_dir
    OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET
    RESULT_VARIABLE _flashcore_cutlass_status)
  if(_flashcore_cutlass_status EQUAL 0 AND _flashcore_cutlass_dir AND EXISTS "${_flashcore_cutlass_dir}/cute/tensor.hpp")
    set(FLASHCORE_PYTHON_CUTLASS_INCLUDE "${_flashcore_cutlass_dir}")
  endif()
endif()
