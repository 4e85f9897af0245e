# GPU runtime detection: nvcc (the CUDA language), the CUDA toolkit and NCCL (issue #4).
#
# stragglar_find_cuda() is called by the top-level CMakeLists.txt when STRAGGLAR_CUDA is AUTO or
# ON. It is a macro, not a function, because enable_language(CUDA) must run in directory scope
# (CMake refuses it inside a function); every helper variable is prefixed _stragglar_cuda_.
#
# On success: STRAGGLAR_HAVE_CUDA=ON, the CUDA language is enabled, CUDAToolkit is found and an
# imported target NCCL::nccl exists. With AUTO and something missing: a STATUS line that says
# what is missing, STRAGGLAR_HAVE_CUDA stays OFF. With ON and something missing: FATAL_ERROR.
#
# Hints: CUDACXX / CMAKE_CUDA_COMPILER for nvcc; NCCL_ROOT / NCCL_HOME (env or cache) for NCCL.
# Architectures default to "90;80" (H100/H200, A100), never "native": CI has no GPU.

include(CheckLanguage)
include(${CMAKE_CURRENT_LIST_DIR}/StragglarNccl.cmake)

macro(_stragglar_cuda_missing what)
  if(STRAGGLAR_CUDA STREQUAL "ON")
    message(FATAL_ERROR "STRAGGLAR_CUDA=ON but ${what}. "
                        "Install it, point CMake at it (CUDACXX, NCCL_ROOT), or use -DSTRAGGLAR_CUDA=AUTO/OFF.")
  else()
    message(STATUS "stragglar: GPU runtime skipped (STRAGGLAR_CUDA=AUTO): ${what}")
  endif()
endmacro()

macro(stragglar_find_cuda)
  set(_stragglar_cuda_ok ON)

  # 1. nvcc. nvcc is often not on PATH: look in the usual places and hand the result to
  # check_language's sub-project through the environment (it does not see our cache).
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(_stragglar_cuda_nvcc nvcc
                 HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda /opt/cuda PATH_SUFFIXES bin)
    if(_stragglar_cuda_nvcc)
      get_filename_component(_stragglar_cuda_nvcc_real "${_stragglar_cuda_nvcc}" REALPATH)
      set(ENV{CUDACXX} "${_stragglar_cuda_nvcc_real}")
    endif()
  endif()
  # Before enable_language: CMake would otherwise pick the compiler's default architecture.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
    set(CMAKE_CUDA_ARCHITECTURES "90;80" CACHE STRING "CUDA architectures (default 90;80; never native)")
  endif()
  if(CMAKE_CUDA_ARCHITECTURES MATCHES "native|all")
    message(WARNING "stragglar: CMAKE_CUDA_ARCHITECTURES=${CMAKE_CUDA_ARCHITECTURES} needs a GPU at "
                    "configure time or builds for every arch; CI uses 90;80")
  endif()
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    set(_stragglar_cuda_ok OFF)
    _stragglar_cuda_missing("no CUDA compiler (nvcc) was found (set CUDACXX or CMAKE_CUDA_COMPILER)")
  endif()

  # 2. The toolkit (cudart, headers), found next to that nvcc.
  if(_stragglar_cuda_ok)
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)  # CMake < 3.26 does not know nvcc's C++20 flag; kernels need 17
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_EXTENSIONS OFF)
    find_package(CUDAToolkit)
    if(NOT CUDAToolkit_FOUND OR NOT TARGET CUDA::cudart_static)
      set(_stragglar_cuda_ok OFF)
      _stragglar_cuda_missing("the CUDA toolkit (CUDAToolkit with a static cudart) was not found next to ${CMAKE_CUDA_COMPILER}")
    endif()
  endif()

  # 3. NCCL: header nccl.h and library nccl (cmake/StragglarNccl.cmake, which the installed
  # package reuses to recreate NCCL::nccl for its consumers).
  if(_stragglar_cuda_ok)
    stragglar_find_nccl()
    if(STRAGGLAR_NCCL_MISSING)
      set(_stragglar_cuda_ok OFF)
      _stragglar_cuda_missing("${STRAGGLAR_NCCL_MISSING}")
    endif()
  endif()

  if(_stragglar_cuda_ok)
    set(STRAGGLAR_HAVE_CUDA ON)
    message(STATUS "stragglar: GPU runtime ON — nvcc ${CMAKE_CUDA_COMPILER_VERSION} "
                   "(archs ${CMAKE_CUDA_ARCHITECTURES}), CUDA toolkit ${CUDAToolkit_VERSION}, "
                   "NCCL ${STRAGGLAR_NCCL_VERSION} (${NCCL_LIBRARY})")
  else()
    set(STRAGGLAR_HAVE_CUDA OFF)
  endif()
endmacro()
