# Shared by the consumer projects of tests/package: every installed header compiles on its own.
#
# stragglar_check_headers(<name> <C|CXX> <target to link> <header file names...>) adds an object
# library <name> with one source per header that includes only that header, twice (include
# guards), compiled with warnings as errors; <target> brings the include paths a user gets.

# The installed headers (<prefix>/include/stragglar), read from the imported stragglar::core.
function(stragglar_installed_headers out_var)
  get_target_property(_dirs stragglar::core INTERFACE_INCLUDE_DIRECTORIES)
  set(_found "")
  foreach(_dir IN LISTS _dirs)
    file(GLOB _headers RELATIVE ${_dir}/stragglar ${_dir}/stragglar/*.h ${_dir}/stragglar/*.hpp)
    list(APPEND _found ${_headers})
  endforeach()
  if(NOT _found)
    message(FATAL_ERROR "no installed headers under ${_dirs}/stragglar")
  endif()
  list(SORT _found)
  set(${out_var} ${_found} PARENT_SCOPE)
endfunction()

function(stragglar_check_headers name language link_target)
  if(language STREQUAL "C")
    set(_ext c)
  else()
    set(_ext cpp)
  endif()
  set(_sources "")
  foreach(_header IN LISTS ARGN)
    string(MAKE_C_IDENTIFIER "${_header}" _id)
    set(_source ${CMAKE_CURRENT_BINARY_DIR}/${name}/${_id}.${_ext})
    file(CONFIGURE OUTPUT ${_source}
         CONTENT "#include <stragglar/${_header}>\n#include <stragglar/${_header}>\nint ${name}_${_id};\n")
    list(APPEND _sources ${_source})
  endforeach()
  add_library(${name} OBJECT ${_sources})
  target_link_libraries(${name} PRIVATE ${link_target})
  target_compile_options(${name} PRIVATE -Wall -Wextra -Wpedantic -Werror)
  list(JOIN ARGN " " _list)
  message(STATUS "${name}: ${language}, alone: ${_list}")
endfunction()
