/*
 * cuda backend, launch: the device does not run graphs (no kernels are
 * shipped); a launch verifies what arrived, in queue order, through the
 * launch verifier (src/device/verify.c). This file is its I/O on CUDA:
 *
 *   - live: the range lies inside one live allocation of this device (the
 *     backend's registry), checked before any DMA touches it;
 *   - read: a D2H copy into pinned scratch queued on the launch's queue q,
 *     after everything the host queued there before (the uploads); flush
 *     synchronizes q, so the readback sees exactly what the device holds
 *     at the launch point (device calls come from one thread at a time);
 *   - write_status: an H2D copy queued on q, so an event recorded on q
 *     after the launch completes after the status is in device memory, as
 *     on the sim device.
 *
 * The backend does not report its writes to the verifier, so a cached
 * Definition verdict holds only while the bytes read back still hash to
 * the validated hash. Launch blocks until q has drained and the check is
 * done; an image error is a verdict in the status (launch returns 0), a
 * CUDA error fails the launch and writes no status.
 */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "device/cuda/cuda_internal.h"
#include "device/verify.h"

typedef struct cu_io {
  hbg_device *dev;
  hbg__cuda *c;
  hbg_dev_queue *q;
} cu_io;

static int io_live(void *ctx, hbg_devptr base, uint64_t rel, uint64_t len) {
  const cu_io *x = ctx;
  return hbg__rtab_holds(&x->c->dmem, base, rel, len);
}

static int io_scratch(void *ctx, int slot, size_t bytes, uint8_t **out) {
  cu_io *x = ctx;
  hbg__cu_scratch *s = slot == 0 ? &x->c->win : &x->c->img;
  HBG__TRY(hbg__cu_scratch_reserve(x->dev, s, bytes));
  *out = s->p;
  return 0;
}

static int io_read(void *ctx, void *dst, hbg_devptr src, uint64_t len) {
  cu_io *x = ctx;
  CUresult e = x->c->f.cuMemcpyDtoHAsync_v2(dst, (CUdeviceptr)src,
                                            (size_t)len, x->q->s);
  if (e != CUDA_SUCCESS)
    return hbg__cu_err(x->dev, e, "cuMemcpyDtoHAsync_v2", HBG_E_DEVICE);
  return 0;
}

static int io_flush(void *ctx) {
  cu_io *x = ctx;
  CUresult e = x->c->f.cuStreamSynchronize(x->q->s);
  if (e != CUDA_SUCCESS)
    return hbg__cu_err(x->dev, e, "cuStreamSynchronize", HBG_E_DEVICE);
  return 0;
}

static int io_write_status(void *ctx, hbg_devptr dst,
                           const hbg_dev_status *st) {
  cu_io *x = ctx;
  *x->q->status = *st;
  CUresult e = x->c->f.cuMemcpyHtoDAsync_v2((CUdeviceptr)dst, x->q->status,
                                            sizeof *st, x->q->s);
  if (e != CUDA_SUCCESS)
    return hbg__cu_err(x->dev, e, "cuMemcpyHtoDAsync_v2", HBG_E_DEVICE);
  return 0;
}

void hbg__cu_verify_free(hbg__cuda *c) {
  if (c->ver) {
    hbg__verify_fini(c->ver);
    free(c->ver);
    c->ver = NULL;
  }
}

int hbg__cu_launch(hbg_device *dev, hbg_dev_queue *q,
                   const hbg_dev_launch_desc *l) {
  hbg__cuda *c = hbg_device_impl(dev);
  HBG__RETURN_IF(l->struct_size < sizeof *l, HBG_E_INVAL);
  if (c->exec_device)
    return hbg__cu_exec_launch(dev, q, l);
  if (l->flags & HBG_DEV_LAUNCH_CAPTURED) {
    hbg_device_set_native(dev, 0,
                          "exec=verify checks each launch on the host (it "
                          "reads the window back), which a capture cannot "
                          "record: capture with exec=device");
    return HBG_E_CAPTURING;
  }
  HBG__RETURN_IF(!hbg__cu_ranges_find(&c->dmem, l->status,
                                      sizeof(hbg_dev_status)),
                 HBG_E_RANGE);
  const int tracing = hbg_device_tracing(dev);
  uint64_t t0 = tracing ? hbg__now_ns() : 0;
  HBG__TRY(hbg__cu_enter(dev, c));
  if (!c->ver) {
    hbg__verifier *v = malloc(sizeof *v);
    if (!v)
      return HBG_E_NOMEM;
    if (hbg__verify_init(v) < 0) {
      free(v);
      return HBG_E_NOMEM;
    }
    c->ver = v;
  }
  if (!q->status) {
    void *p = NULL;
    CUresult e = c->f.cuMemHostAlloc(&p, sizeof(hbg_dev_status),
                                     CU_MEMHOSTALLOC_PORTABLE);
    if (e != CUDA_SUCCESS)
      return hbg__cu_err(dev, e, "cuMemHostAlloc", HBG_E_NOMEM);
    q->status = p;
  }
  cu_io x = {.dev = dev, .c = c, .q = q};
  const hbg__verify_io io = {.ctx = &x,
                             .flags = 0,
                             .live = io_live,
                             .scratch = io_scratch,
                             .read = io_read,
                             .flush = io_flush,
                             .write_status = io_write_status};
  uint64_t rb_bytes = 0;
  HBG__TRY(hbg__verify_launch(c->ver, &io, l, &rb_bytes));
  HBG__CU_ADD(c, handshakes, 1); /* the launch waited for its queue */
  HBG__CU_ADD(c, launches, 1);
  if (tracing) {
    hbg_trace_event ev = {.track = HBG_TRACK_DEVICE,
                          .name = "verify",
                          .start_ns = t0,
                          .dur_ns = hbg__now_ns() - t0,
                          .bytes = rb_bytes};
    hbg_device_trace(dev, &ev);
  }
  return 0;
}
