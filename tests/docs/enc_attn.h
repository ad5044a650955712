/* A stand-in for the header that examples/export_torch.py writes (docs/pytorch.md's example),
   for tests/docs_check.sh: the names it defines (the real one includes mha.h too). */
#include "mha.h"
static const mha_shape enc_shape = MHA_INIT;
static const mha_weights enc_weights = MHA_INIT;
