/*
 * relayc.h: the whole public API. Include this one header (every header of
 * include/relayc/; tests/api/check_exports.sh checks that none is left out).
 */
#ifndef RELAYC_H
#define RELAYC_H

#include "relayc/base.h"
#include "relayc/tensor.h"
#include "relayc/target.h"
#include "relayc/ir.h"
#include "relayc/op.h"
#include "relayc/value.h"
#include "relayc/interp.h"
#include "relayc/vm.h"
#include "relayc/params.h"
#include "relayc/optim.h"
#include "relayc/rng.h"
#include "relayc/datasets.h"
#include "relayc/checkpoint.h"
#include "relayc/init.h"
#include "relayc/threads.h"
#include "relayc/pass.h"
#include "relayc/ad.h"
#include "relayc/train.h"
#include "relayc/dist.h"
#include "relayc/export.h"

#endif
