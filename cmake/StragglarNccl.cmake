# NCCL detection, shared by the build and the installed package (issue #10 item 6).
#
# NCCL ships no CMake package, so whoever links stragglar::nccl needs an imported target
# NCCL::nccl: cmake/StragglarCuda.cmake creates it when stragglar is built, and the installed
# stragglarConfig.cmake (this file is installed beside it) creates it again in the consumer's
# project. The exported stragglar::nccl therefore names NCCL::nccl, never a path.
#
# stragglar_find_nccl() — call after find_package(CUDAToolkit). Looks for nccl.h and libnccl in
# NCCL_ROOT / NCCL_HOME (environment or variable), the CUDA toolkit's directories, then the
# system paths. Sets NCCL_INCLUDE_DIR and NCCL_LIBRARY (cache), STRAGGLAR_NCCL_VERSION
# ("major.minor") and, when something is missing or too old, STRAGGLAR_NCCL_MISSING (what, in
# words; empty on success). On success NCCL::nccl exists (an existing NCCL::nccl is kept).

set(STRAGGLAR_NCCL_MIN_VERSION 2.10)  # ncclAvg and ncclBfloat16

function(stragglar_find_nccl)
  set(STRAGGLAR_NCCL_MISSING "" PARENT_SCOPE)
  if(TARGET NCCL::nccl)
    return()
  endif()
  set(_hints $ENV{NCCL_ROOT} $ENV{NCCL_HOME} ${NCCL_ROOT} ${NCCL_HOME} ${CUDAToolkit_LIBRARY_ROOT})
  find_path(NCCL_INCLUDE_DIR nccl.h
            HINTS ${_hints} ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl
               HINTS ${_hints} ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
  if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
    set(_what "")
    if(NOT NCCL_INCLUDE_DIR)
      string(APPEND _what "header nccl.h ")
    endif()
    if(NOT NCCL_LIBRARY)
      string(APPEND _what "library libnccl ")
    endif()
    set(STRAGGLAR_NCCL_MISSING "NCCL not found (missing: ${_what}; set NCCL_ROOT)" PARENT_SCOPE)
    return()
  endif()

  file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _major REGEX "^#define NCCL_MAJOR [0-9]+")
  file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _minor REGEX "^#define NCCL_MINOR [0-9]+")
  string(REGEX REPLACE ".* ([0-9]+)$" "\\1" _major "${_major}")
  string(REGEX REPLACE ".* ([0-9]+)$" "\\1" _minor "${_minor}")
  set(STRAGGLAR_NCCL_VERSION "${_major}.${_minor}" PARENT_SCOPE)
  if("${_major}.${_minor}" VERSION_LESS STRAGGLAR_NCCL_MIN_VERSION)
    set(STRAGGLAR_NCCL_MISSING
        "NCCL ${_major}.${_minor} at ${NCCL_INCLUDE_DIR} is older than ${STRAGGLAR_NCCL_MIN_VERSION}" PARENT_SCOPE)
    return()
  endif()

  add_library(NCCL::nccl UNKNOWN IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endfunction()
