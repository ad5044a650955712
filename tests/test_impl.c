/* The one translation unit of the test program that compiles the implementation. */
#define MHA_IMPLEMENTATION
#include "../mha.h"
