# mha::impl: mha.h's implementation compiled once, as a static library, with -O2 (/O2 with MSVC)
# whatever the consumer's build type: a project with no build type, or a Debug one, would
# otherwise build the library unoptimised, many times slower. Link mha::impl instead of
# defining MHA_IMPLEMENTATION in a file of your own; set MHA_NATIVE to ON for -march=native
# (-mcpu=native on aarch64), the host's vector unit. Included by CMakeLists.txt and by an
# installed mhaConfig.cmake, after mha::mha exists.
option(MHA_NATIVE "mha::impl: compile the implementation for this host's vector unit" OFF)
if(NOT TARGET mha_impl)
  set(_mha_impl_c "${CMAKE_CURRENT_BINARY_DIR}/mha_impl/mha_impl.c")
  file(GENERATE OUTPUT "${_mha_impl_c}" CONTENT "#define MHA_IMPLEMENTATION\n#include \"mha.h\"\n")
  set_source_files_properties("${_mha_impl_c}" PROPERTIES GENERATED TRUE)
  add_library(mha_impl STATIC "${_mha_impl_c}")
  target_link_libraries(mha_impl PUBLIC mha::mha)
  if(MSVC)
    target_compile_options(mha_impl PRIVATE /O2)
  else()
    target_compile_options(mha_impl PRIVATE -O2)
    if(MHA_NATIVE AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
      target_compile_options(mha_impl PRIVATE -mcpu=native)
    elseif(MHA_NATIVE)
      target_compile_options(mha_impl PRIVATE -march=native)
    endif()
  endif()
  add_library(mha::impl ALIAS mha_impl)
endif()
