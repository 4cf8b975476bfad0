/* nn.c: registry entries of the nn operator family (being written). */
#include "relayc/op.h"

const ry_op ry_ops_nn[] = {{0}};
const int ry_ops_nn_count = 0;
