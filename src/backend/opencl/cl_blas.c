/*
 * cl_blas.c (opencl): the device layer's GEMM (device_kernels.h's
 * ry_dk_gemm, row-major) through CLBlast on the device's queue, recorded
 * for --profile like a kernel launch. The shapes' bookkeeping is the
 * device layer's (src/backend/device/dk_gemm.c).
 */
#include "backend/opencl/cl_impl.h"
/* after cl_impl.h, which picks the OpenCL version */
#include <clblast_c.h>

ry_status ry_cl_gemm(ry_kernel_ctx *c, const ry_dk_gemm *g) {
    CLBlastTranspose TA = g->ta ? CLBlastTransposeYes : CLBlastTransposeNo;
    CLBlastTranspose TB = g->tb ? CLBlastTransposeYes : CLBlastTransposeNo;
    size_t ao = (size_t)(ry_dk_off(g->a) + g->aoff), bo = (size_t)(ry_dk_off(g->b) + g->boff),
           co = (size_t)(ry_dk_off(g->c) + g->coff);
    size_t m = (size_t)g->m, n = (size_t)g->n, k = (size_t)g->k;
    cl_command_queue q = ry_cl.queue;
    pthread_mutex_lock(&ry_cl.lock);
    cl_event *ev = ry_cl_event_slot();
    pthread_mutex_unlock(&ry_cl.lock);
    CLBlastStatusCode st;
    if (g->c->dtype == RY_FLOAT32)
        st = CLBlastSgemm(CLBlastLayoutRowMajor, TA, TB, m, n, k, 1.0f, ry_cl_mem(g->a), ao,
                          (size_t)g->lda, ry_cl_mem(g->b), bo, (size_t)g->ldb, g->acc ? 1.0f : 0.0f, ry_cl_mem(g->c), co,
                          (size_t)g->ldc, &q, ev);
    else
        st = CLBlastDgemm(CLBlastLayoutRowMajor, TA, TB, m, n, k, 1.0, ry_cl_mem(g->a), ao,
                          (size_t)g->lda, ry_cl_mem(g->b), bo, (size_t)g->ldb, g->acc ? 1.0 : 0.0, ry_cl_mem(g->c), co,
                          (size_t)g->ldc, &q, ev);
    if (st != CLBlastSuccess)
        return ry_error_at(c->err, c->span, "opencl:%d (%s): %s: CLBlast GEMM failed (status %d)",
                           ry_cl.index, ry_cl.name, c->op->name, (int)st);
    pthread_mutex_lock(&ry_cl.lock);
    ry_cl.count.launches++;
    pthread_mutex_unlock(&ry_cl.lock);
    return RY_OK;
}
