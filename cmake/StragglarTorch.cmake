# PyTorch detection for the c10d backend "stragglar" (issue #11): src/torch, tests/torch.
#
# stragglar_find_torch() is called by the top-level CMakeLists.txt when STRAGGLAR_TORCH is AUTO or
# ON. It asks the Python that will import the module (STRAGGLAR_PYTHON, default: `python3` on
# PATH) where torch lives — `torch.utils.cmake_prefix_path` and the files beside it — and which
# version, C++ ABI and CUDA it was built with, then defines
#
#   stragglar::torch_cpu   headers (SYSTEM) + libc10, libtorch, libtorch_cpu, libtorch_python
#   stragglar::torch_cuda  + libc10_cuda, libtorch_cuda   (only when torch has CUDA)
#   Python3::Module        the interpreter's headers for the extension module (FindPython3)
#
# and STRAGGLAR_HAVE_TORCH=ON, STRAGGLAR_TORCH_VERSION, STRAGGLAR_TORCH_CUDA (torch.version.cuda,
# empty for a CPU build), STRAGGLAR_TORCH_LIB_DIR, STRAGGLAR_TORCH_NCCL_LIB_DIR (the directory of
# the libnccl.so.2 a CUDA torch loads, when it comes from the nvidia-nccl wheel).
#
# Why not find_package(Torch): TorchConfig pulls in Caffe2's CUDA setup, which rewrites the
# CUDA architectures and NVCC flags of the whole project (it ignores CMAKE_CUDA_ARCHITECTURES,
# warns, and autodetects eleven architectures) and takes ~15 s to configure. The extension needs
# headers and five libraries; the paths are the ones TorchConfig itself would use.
#
# The backend also needs the UCX engine (src/ucx) for CPU tensors: without UCX it is not built.
# Sanitizer builds skip it (a Python extension under ASan needs the runtime preloaded).

macro(_stragglar_torch_missing what)
  if(STRAGGLAR_TORCH STREQUAL "ON")
    message(FATAL_ERROR "STRAGGLAR_TORCH=ON but ${what}. Install torch for ${STRAGGLAR_PYTHON} "
                        "(python3 -m pip install torch), set STRAGGLAR_PYTHON, or use -DSTRAGGLAR_TORCH=AUTO/OFF.")
  else()
    message(STATUS "stragglar: PyTorch backend skipped (STRAGGLAR_TORCH=AUTO): ${what}")
  endif()
endmacro()

macro(stragglar_find_torch)
  set(STRAGGLAR_HAVE_TORCH OFF)
  set(_stragglar_torch_ok ON)
  if(NOT STRAGGLAR_PYTHON)
    find_program(STRAGGLAR_PYTHON NAMES python3 DOC "The Python whose torch the c10d backend is built against")
  endif()
  if(STRAGGLAR_SANITIZE)
    set(_stragglar_torch_ok OFF)
    _stragglar_torch_missing("this is a sanitizer build (STRAGGLAR_SANITIZE=ON)")
  elseif(NOT STRAGGLAR_HAVE_UCX)
    set(_stragglar_torch_ok OFF)
    _stragglar_torch_missing("UCX was not found (its CPU engine; install libucx-dev)")
  elseif(NOT STRAGGLAR_PYTHON)
    set(_stragglar_torch_ok OFF)
    _stragglar_torch_missing("no python3 was found (set STRAGGLAR_PYTHON)")
  endif()

  if(_stragglar_torch_ok)
    # One interpreter start: every fact on its own line.
    execute_process(
      COMMAND "${STRAGGLAR_PYTHON}" -c "
import importlib.util, os, torch, torch.utils
d = os.path.dirname(torch.__file__)
spec = importlib.util.find_spec('nvidia.nccl') if torch.version.cuda else None
nccl = os.path.join(list(spec.submodule_search_locations)[0], 'lib') if spec and spec.submodule_search_locations else ''
print(torch.__version__.split('+')[0])
print(torch.utils.cmake_prefix_path)
print(os.path.join(d, 'include'))
print(os.path.join(d, 'lib'))
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(torch.version.cuda or '')
print(nccl if os.path.isfile(os.path.join(nccl, 'libnccl.so.2')) else '')
print(int(torch.distributed.is_available()))
"
      RESULT_VARIABLE _stragglar_torch_rc
      OUTPUT_VARIABLE _stragglar_torch_out
      ERROR_VARIABLE _stragglar_torch_err
      OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT _stragglar_torch_rc EQUAL 0)
      set(_stragglar_torch_ok OFF)
      string(REGEX REPLACE ".*\n([^\n]+)$" "\\1" _stragglar_torch_err "${_stragglar_torch_err}")
      _stragglar_torch_missing("${STRAGGLAR_PYTHON} cannot import torch (${_stragglar_torch_err})")
    endif()
  endif()

  if(_stragglar_torch_ok)
    string(REPLACE "\n" ";" _stragglar_torch_facts "${_stragglar_torch_out}")
    list(GET _stragglar_torch_facts 0 STRAGGLAR_TORCH_VERSION)
    list(GET _stragglar_torch_facts 1 STRAGGLAR_TORCH_CMAKE_PREFIX)
    list(GET _stragglar_torch_facts 2 _stragglar_torch_include)
    list(GET _stragglar_torch_facts 3 STRAGGLAR_TORCH_LIB_DIR)
    list(GET _stragglar_torch_facts 4 STRAGGLAR_TORCH_CXX11_ABI)
    list(GET _stragglar_torch_facts 5 STRAGGLAR_TORCH_CUDA)
    list(GET _stragglar_torch_facts 6 STRAGGLAR_TORCH_NCCL_LIB_DIR)
    list(GET _stragglar_torch_facts 7 _stragglar_torch_distributed)
    if(STRAGGLAR_TORCH_VERSION VERSION_LESS 2.6)
      set(_stragglar_torch_ok OFF)
      _stragglar_torch_missing("torch ${STRAGGLAR_TORCH_VERSION} is older than 2.6 (extended_api backends with devices)")
    elseif(NOT _stragglar_torch_distributed)
      set(_stragglar_torch_ok OFF)
      _stragglar_torch_missing("torch ${STRAGGLAR_TORCH_VERSION} was built without torch.distributed")
    elseif(NOT STRAGGLAR_TORCH_CXX11_ABI)
      # Our static libraries use the new libstdc++ ABI (every torch wheel since 2.7 does too).
      set(_stragglar_torch_ok OFF)
      _stragglar_torch_missing("torch ${STRAGGLAR_TORCH_VERSION} uses the old libstdc++ ABI (_GLIBCXX_USE_CXX11_ABI=0)")
    endif()
  endif()

  if(_stragglar_torch_ok)
    # The extension's headers and suffix come from this same interpreter (unless the project
    # already chose one with -DPython3_EXECUTABLE).
    if(NOT Python3_EXECUTABLE)
      set(Python3_EXECUTABLE "${STRAGGLAR_PYTHON}")
    endif()
    find_package(Python3 COMPONENTS Interpreter Development.Module)
    if(NOT Python3_Development.Module_FOUND)
      set(_stragglar_torch_ok OFF)
      _stragglar_torch_missing("the headers of ${STRAGGLAR_PYTHON} (Python.h) were not found")
    endif()
  endif()

  if(_stragglar_torch_ok)
    set(_stragglar_torch_libs)
    foreach(_lib c10 torch torch_cpu torch_python)
      set(_stragglar_torch_lib "${STRAGGLAR_TORCH_LIB_DIR}/lib${_lib}.so")
      if(NOT EXISTS "${_stragglar_torch_lib}")
        set(_stragglar_torch_ok OFF)
        _stragglar_torch_missing("${_stragglar_torch_lib} is missing")
        break()
      endif()
      list(APPEND _stragglar_torch_libs "${_stragglar_torch_lib}")
    endforeach()
  endif()

  if(_stragglar_torch_ok)
    if(NOT TARGET stragglar::torch_cpu)
      add_library(stragglar::torch_cpu INTERFACE IMPORTED)
      set_target_properties(stragglar::torch_cpu PROPERTIES
        INTERFACE_INCLUDE_DIRECTORIES "${_stragglar_torch_include};${_stragglar_torch_include}/torch/csrc/api/include"
        INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=1"
        INTERFACE_LINK_LIBRARIES "${_stragglar_torch_libs}")
      if(STRAGGLAR_TORCH_CUDA AND EXISTS "${STRAGGLAR_TORCH_LIB_DIR}/libtorch_cuda.so")
        add_library(stragglar::torch_cuda INTERFACE IMPORTED)
        set_target_properties(stragglar::torch_cuda PROPERTIES
          INTERFACE_LINK_LIBRARIES "stragglar::torch_cpu;${STRAGGLAR_TORCH_LIB_DIR}/libc10_cuda.so;${STRAGGLAR_TORCH_LIB_DIR}/libtorch_cuda.so")
      endif()
    endif()
    set(STRAGGLAR_HAVE_TORCH ON)
    set(_stragglar_torch_gpu "CPU only")
    if(STRAGGLAR_TORCH_CUDA)
      set(_stragglar_torch_gpu "CUDA ${STRAGGLAR_TORCH_CUDA}")
    endif()
    message(STATUS "stragglar: PyTorch backend ON — torch ${STRAGGLAR_TORCH_VERSION} (${_stragglar_torch_gpu}) "
                   "from ${STRAGGLAR_TORCH_CMAKE_PREFIX}, Python ${Python3_VERSION} (${STRAGGLAR_PYTHON})")
  endif()
endmacro()
