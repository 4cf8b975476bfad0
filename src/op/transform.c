/* transform.c: registry entries of the transform operator family (being written). */
#include "relayc/op.h"

const ry_op ry_ops_transform[] = {{0}};
const int ry_ops_transform_count = 0;
