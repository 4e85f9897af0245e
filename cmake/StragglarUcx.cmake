# UCX detection for the CPU engine of the PyTorch backend (issue #11): src/ucx, tests/ucx,
# tools/ucx_bench.
#
# stragglar_find_ucx() is called by the top-level CMakeLists.txt when STRAGGLAR_UCX is AUTO or
# ON. It finds UCX through pkg-config (module `ucx`, Debian's libucx-dev) and defines the
# imported target PkgConfig::UCX. On success STRAGGLAR_HAVE_UCX=ON. With AUTO and UCX missing:
# a loud STATUS line and STRAGGLAR_HAVE_UCX stays OFF; with ON and UCX missing: FATAL_ERROR.
# Hint: PKG_CONFIG_PATH for a UCX installed outside the system prefix.

function(_stragglar_ucx_missing what)
  if(STRAGGLAR_UCX STREQUAL "ON")
    message(FATAL_ERROR "STRAGGLAR_UCX=ON but ${what}. Install libucx-dev (scripts/install-deps.sh), "
                        "point PKG_CONFIG_PATH at your UCX, or use -DSTRAGGLAR_UCX=AUTO/OFF.")
  else()
    message(STATUS "stragglar: UCX transport skipped (STRAGGLAR_UCX=AUTO): ${what}")
  endif()
endfunction()

macro(stragglar_find_ucx)
  find_package(PkgConfig QUIET)
  if(NOT PKG_CONFIG_FOUND)
    _stragglar_ucx_missing("pkg-config was not found")
  else()
    pkg_check_modules(UCX QUIET IMPORTED_TARGET GLOBAL ucx>=1.10)
    if(UCX_FOUND)
      set(STRAGGLAR_HAVE_UCX ON)
      message(STATUS "stragglar: UCX ${UCX_VERSION} found (${UCX_LINK_LIBRARIES})")
    else()
      _stragglar_ucx_missing("pkg-config found no module 'ucx' >= 1.10")
    endif()
  endif()
endmacro()
