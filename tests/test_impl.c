/* The one translation unit of the test program that compiles the implementation.
   The suite tests the reference path unless the build asks for the fast one
   (-DMHA_FAST=1): the library's own default is the fast path on hosted
   x86-64 and aarch64. */
#ifndef MHA_FAST
#define MHA_FAST 0
#endif
#define MHA_IMPLEMENTATION
#include "../mha.h"
