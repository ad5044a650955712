# find_package(mha) for an installed mha.h (make install): the INTERFACE
# target mha::mha with the include directory (and libm on Unix), and mha::impl
# (mhaImpl.cmake: the implementation compiled once, with -O2).
get_filename_component(_mha_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET mha::mha)
  add_library(mha::mha INTERFACE IMPORTED)
  set_target_properties(mha::mha PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_mha_prefix}/include")
  if(UNIX)
    set_target_properties(mha::mha PROPERTIES INTERFACE_LINK_LIBRARIES m)
  endif()
endif()
include("${CMAKE_CURRENT_LIST_DIR}/mhaImpl.cmake")
set(mha_FOUND TRUE)
