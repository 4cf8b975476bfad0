/* conv.c: registry entries of the convolution and pooling family (being written). */
#include "relayc/op.h"

const ry_op ry_ops_conv[] = {{0}};
const int ry_ops_conv_count = 0;
