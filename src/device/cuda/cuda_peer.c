/*
 * The peer executors (hbg_peer.h) on the cuda backend: a workload's decode
 * step run the way a runtime without hbg runs it, one kernel launch per
 * kernel call, for measurement beside hbg's binds.
 *
 * Both kinds launch the device module's hbg_dc_node (devcode/node.c) once
 * per call of hbg_workload_nodes' list, in the list's order, on the peer's
 * own stream: one CTA of up to 256 threads per call (the device's
 * MAX_BLOCK_DIM_X caps it: 1 on the stand-in driver), the call's
 * arguments by value (hbg_dc_node_args). Graph-internal tensors live in
 * the peer's node heap; the kernels' scratch in one block sized for the
 * largest call; a status word in device memory takes the first call the
 * device rejects.
 *
 *   eager       every step: the call list, an event, one cuLaunchKernel
 *               per call, an event.
 *   cuda-graph  the first step (and any step whose calls differ in number
 *               or kernels from the captured ones) captures the launches
 *               (cuStreamBeginCapture_v2 ... cuStreamEndCapture) and
 *               instantiates the graph; every step compares each call's
 *               arguments with what its graph node holds and updates the
 *               differing nodes (cuGraphExecKernelNodeSetParams_v2), then
 *               an event, one cuGraphLaunch, an event.
 *
 * Every driver call goes through the backend's table (c->f); a failure is
 * mapped by hbg__cu_err (the native message kept on the device and
 * repeated in hbg_last_error()).
 */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "device/cuda/cuda_internal.h"
#include "device/cuda/cuda_peer.h"
#include "device/cuda/devcode/devcode.h"
#include "kernels/kern_src.h"

_Static_assert(HBG_DC_NODE_MAX_TENSORS == HBG_WORKLOAD_NODE_MAX_TENSORS &&
                   HBG_DC_NODE_MAX_SCALARS == HBG_WORKLOAD_NODE_MAX_SCALARS,
               "hbg_dc_node takes every call of a workload");

#define PEER_LANES 256u

typedef struct cu_peer cu_peer;

struct cu_peer {
  hbg__peer_src src; /* the workload's calls, the kind's name */
  hbg_device *dev;
  hbg__cuda *c;
  int kind;
  unsigned lanes;
  CUstream s;
  CUevent e0, e1; /* around the step's kernels */
  int timed;      /* cuEventElapsedTime resolved: device_ns measured */
  hbg_devptr heap, scratch, status;
  uint64_t scratch_floats;
  /* this step's calls and their arguments (cap entries each) */
  hbg_workload_node *calls;
  hbg_dc_node_args *args;
  uint32_t n, cap;
  /* cuda-graph: the captured graph, its node per call, the arguments each
   * node of the executable graph holds now */
  CUgraph g;
  CUgraphExec x;
  CUgraphNode *gnode;
  hbg_dc_node_args *held;
  uint32_t n_graph;
  /* the step in flight */
  int launched;
  uint32_t step;
  uint64_t t_end; /* host time launch returned */
  hbg_peer_stats st;
};

/* The device's native message as the thread's last error. @return rc. */
static int pe_note(cu_peer *p, int rc) {
  const char *msg = NULL;
  if (hbg_device_native_error(p->dev, NULL, &msg) == 0 && msg)
    hbg__error_set("peer %s: %s", p->src.name, msg);
  return rc;
}

/* Map a failed driver call (native message kept). @return the HBG_E_*. */
static int pe_cu(cu_peer *p, CUresult e, const char *call) {
  return pe_note(p, hbg__cu_err(p->dev, e, call, HBG_E_DEVICE));
}

#define PE_CU(p, label, rc, fn, ...)                                           \
  do {                                                                         \
    CUresult pe__e = (p)->c->f.fn(__VA_ARGS__);                                \
    if (pe__e != CUDA_SUCCESS) {                                               \
      rc = pe_cu((p), pe__e, #fn);                                             \
      goto label;                                                              \
    }                                                                          \
  } while (0)

/* The kernels' view of a call (metadata only) for sizing its scratch. */
static uint64_t pe_scratch_floats(const hbg_workload_node *nd) {
  hbg__ktensor t[HBG_WORKLOAD_NODE_MAX_TENSORS];
  uint32_t nt = HBG__MIN(nd->n_tensors, HBG_WORKLOAD_NODE_MAX_TENSORS);
  for (uint32_t k = 0; k < nt; k++) {
    const hbg_tensor *x = &nd->tensors[k];
    t[k].data = NULL;
    t[k].dtype = x->dtype;
    t[k].ndim = x->ndim;
    t[k].mode = x->mode;
    memcpy(t[k].shape, x->shape, sizeof t[k].shape);
    memcpy(t[k].strides, x->strides, sizeof t[k].strides);
  }
  hbg__kcall kc;
  memset(&kc, 0, sizeof kc);
  kc.kernel = nd->kernel;
  kc.nt = nt;
  kc.ns = nd->n_scalars;
  kc.t = t;
  kc.sc = nd->scalars;
  return hbg__k_scratch_floats(&kc);
}

/* The calls of `step` into p->calls (grown as needed). */
static int pe_nodes(cu_peer *p, uint32_t step) {
  for (;;) {
    uint32_t n = 0;
    /* (out NULL would only count) */
    int rc = p->calls ? p->src.nodes(p->src.w, step, p->heap, p->calls,
                                     p->cap, &n)
                      : HBG_E_LIMIT;
    if (!p->calls)
      n = 256;
    if (rc == 0) {
      p->n = n;
      return 0;
    }
    if (rc != HBG_E_LIMIT || n <= p->cap)
      return rc;
    hbg_workload_node *nc = realloc(p->calls, (size_t)n * sizeof *nc);
    if (!nc)
      return HBG_E_NOMEM;
    p->calls = nc;
    hbg_dc_node_args *na = realloc(p->args, (size_t)n * sizeof *na);
    if (!na)
      return HBG_E_NOMEM;
    p->args = na;
    p->cap = n;
  }
}

/* Call i's arguments, every unused byte zero (they are compared). */
static int pe_args(cu_peer *p, uint32_t i) {
  const hbg_workload_node *nd = &p->calls[i];
  hbg_dc_node_args *a = &p->args[i];
  if (nd->n_tensors > HBG_DC_NODE_MAX_TENSORS ||
      nd->n_scalars > HBG_DC_NODE_MAX_SCALARS) {
    hbg__error_set("peer: call %u has %u tensors and %u scalars (at most "
                   "%u and %u)",
                   i, nd->n_tensors, nd->n_scalars, HBG_DC_NODE_MAX_TENSORS,
                   HBG_DC_NODE_MAX_SCALARS);
    return HBG_E_LIMIT;
  }
  memset(a, 0, sizeof *a);
  a->status = p->status;
  a->scratch = p->scratch;
  a->scratch_floats = p->scratch_floats;
  a->kernel = nd->kernel;
  a->n_tensors = nd->n_tensors;
  a->n_scalars = nd->n_scalars;
  a->index = i;
  for (uint32_t k = 0; k < nd->n_tensors; k++) {
    const hbg_tensor *t = &nd->tensors[k];
    hbg_dc_ntensor *r = &a->t[k];
    r->addr = t->addr + t->offset;
    memcpy(r->shape, t->shape, sizeof r->shape);
    memcpy(r->strides, t->strides, sizeof r->strides);
    r->dtype = t->dtype;
    r->ndim = t->ndim;
    r->mode = t->mode;
  }
  memcpy(a->sc, nd->scalars, (size_t)nd->n_scalars * sizeof a->sc[0]);
  return 0;
}

static void pe_params(const cu_peer *p, CUDA_KERNEL_NODE_PARAMS *kp,
                      void **pp) {
  memset(kp, 0, sizeof *kp);
  kp->func = p->c->fn_node;
  kp->gridDimX = kp->gridDimY = kp->gridDimZ = 1;
  kp->blockDimX = p->lanes;
  kp->blockDimY = kp->blockDimZ = 1;
  kp->kernelParams = pp;
}

static int pe_launch_calls(cu_peer *p) {
  int rc = 0;
  for (uint32_t i = 0; i < p->n; i++) {
    void *pp[] = {&p->args[i]};
    PE_CU(p, out, rc, cuLaunchKernel, p->c->fn_node, 1, 1, 1, p->lanes, 1, 1,
          0, p->s, pp, NULL);
  }
out:
  return rc;
}

static void pe_graph_drop(cu_peer *p) {
  if (p->x)
    (void)p->c->f.cuGraphExecDestroy(p->x);
  if (p->g)
    (void)p->c->f.cuGraphDestroy(p->g);
  p->x = NULL;
  p->g = NULL;
  p->n_graph = 0;
}

/* Each captured node's call (its arguments carry the index). */
static int pe_graph_map(cu_peer *p) {
  int rc = 0;
  size_t nn = 0;
  CUgraphNode *v = NULL;
  PE_CU(p, out, rc, cuGraphGetNodes, p->g, NULL, &nn);
  if (nn != p->n)
    goto bad;
  CUgraphNode *gn = realloc(p->gnode, (nn ? nn : 1) * sizeof *gn);
  if (gn)
    p->gnode = gn;
  v = calloc(nn ? nn : 1, sizeof *v);
  if (!v || !gn) {
    rc = HBG_E_NOMEM;
    goto out;
  }
  memset(gn, 0, nn * sizeof *gn);
  PE_CU(p, out, rc, cuGraphGetNodes, p->g, v, &nn);
  for (size_t j = 0; j < nn; j++) {
    CUDA_KERNEL_NODE_PARAMS kp;
    PE_CU(p, out, rc, cuGraphKernelNodeGetParams_v2, v[j], &kp);
    hbg_dc_node_args a;
    /* (the function handle a driver returns need not be the one launched:
     * the node is known by the call index in its arguments) */
    if (!kp.kernelParams || !kp.kernelParams[0])
      goto bad;
    memcpy(&a, kp.kernelParams[0], sizeof a);
    if (a.index >= p->n || gn[a.index])
      goto bad;
    gn[a.index] = v[j];
  }
  goto out;
bad:
  hbg_device_set_native(p->dev, 0,
                        "the captured graph's %zu nodes are not the step's "
                        "%u hbg_dc_node calls",
                        nn, p->n);
  rc = pe_note(p, HBG_E_DEVICE);
out:
  free(v);
  return rc;
}

/* Capture the step's launches and instantiate them. */
static int pe_capture(cu_peer *p) {
  int rc = 0;
  pe_graph_drop(p);
  uint64_t t0 = hbg__now_ns();
  PE_CU(p, out, rc, cuStreamBeginCapture_v2, p->s,
        CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  rc = pe_launch_calls(p);
  CUgraph g = NULL;
  CUresult e = p->c->f.cuStreamEndCapture(p->s, &g);
  p->g = g;
  if (rc == 0 && e != CUDA_SUCCESS)
    rc = pe_cu(p, e, "cuStreamEndCapture");
  if (rc)
    goto out;
  uint64_t t1 = hbg__now_ns();
  PE_CU(p, out, rc, cuGraphInstantiateWithFlags, &p->x, p->g, 0);
  p->st.capture_ns = t1 - t0;
  p->st.instantiate_ns = hbg__now_ns() - t1;
  rc = pe_graph_map(p);
  if (rc)
    goto out;
  if (p->n) {
    hbg_dc_node_args *h = realloc(p->held, (size_t)p->n * sizeof *h);
    if (!h) {
      rc = HBG_E_NOMEM;
      goto out;
    }
    p->held = h;
    memcpy(h, p->args, (size_t)p->n * sizeof *h);
  }
  p->n_graph = p->n;
out:
  if (rc) {
    pe_graph_drop(p);
    p->st.capture_ns = p->st.instantiate_ns = 0;
  }
  return rc;
}

/* The captured graph runs these calls: same count, same kernels. */
static int pe_graph_fits(const cu_peer *p) {
  if (!p->x || p->n != p->n_graph)
    return 0;
  for (uint32_t i = 0; i < p->n; i++)
    if (p->args[i].kernel != p->held[i].kernel)
      return 0;
  return 1;
}

/* Update the nodes whose arguments changed since they were set. */
static int pe_update(cu_peer *p) {
  int rc = 0;
  for (uint32_t i = 0; i < p->n; i++) {
    if (!memcmp(&p->args[i], &p->held[i], sizeof p->args[i]))
      continue;
    void *pp[] = {&p->args[i]};
    CUDA_KERNEL_NODE_PARAMS kp;
    pe_params(p, &kp, pp);
    PE_CU(p, out, rc, cuGraphExecKernelNodeSetParams_v2, p->x, p->gnode[i],
          &kp);
    p->held[i] = p->args[i];
    p->st.updates++;
  }
out:
  return rc;
}

static int cu_peer_launch(void *pv, uint32_t step) {
  cu_peer *p = pv;
  if (p->launched) {
    hbg__error_set("peer %s: step %u is launched and not waited yet",
                   p->src.name, p->step);
    return HBG_E_BUSY;
  }
  uint64_t t0 = hbg__now_ns();
  int rc = hbg__cu_enter(p->dev, p->c);
  if (rc)
    return pe_note(p, rc);
  memset(&p->st, 0, sizeof p->st);
  p->st.struct_size = sizeof p->st;
  p->st.kind = (uint32_t)p->kind;
  rc = pe_nodes(p, step);
  for (uint32_t i = 0; rc == 0 && i < p->n; i++)
    rc = pe_args(p, i);
  if (rc)
    return rc;
  int queued = 0;
  if (p->kind == HBG_PEER_CUDA_GRAPH) {
    if (!pe_graph_fits(p)) {
      rc = pe_capture(p);
      if (rc)
        return rc;
    } else {
      rc = pe_update(p);
      if (rc)
        return rc;
    }
    PE_CU(p, out, rc, cuEventRecord, p->e0, p->s);
    queued = 1;
    PE_CU(p, out, rc, cuGraphLaunch, p->x, p->s);
    p->st.launches = 1;
  } else {
    PE_CU(p, out, rc, cuEventRecord, p->e0, p->s);
    queued = 1;
    rc = pe_launch_calls(p);
    if (rc)
      goto out;
    p->st.launches = p->n;
  }
  PE_CU(p, out, rc, cuEventRecord, p->e1, p->s);
  p->st.nodes = p->n;
  p->t_end = hbg__now_ns();
  p->st.control_plane_ns = p->t_end - t0;
  p->step = step;
  p->launched = 1;
  return 0;
out:
  /* What was queued finishes before the error returns. */
  if (queued)
    (void)p->c->f.cuStreamSynchronize(p->s);
  return rc;
}

static int cu_peer_wait(void *pv, hbg_peer_stats *st) {
  cu_peer *p = pv;
  if (!p->launched) {
    hbg__error_set("peer %s: nothing launched", p->src.name);
    return HBG_E_STATE;
  }
  p->launched = 0;
  int rc = hbg__cu_enter(p->dev, p->c);
  if (rc)
    return pe_note(p, rc);
  PE_CU(p, out, rc, cuEventSynchronize, p->e1);
  p->st.exec_ns = hbg__now_ns() - p->t_end;
  if (p->timed) {
    float ms = 0;
    PE_CU(p, out, rc, cuEventElapsedTime_v2, &ms, p->e0, p->e1);
    p->st.device_ns = ms > 0 ? (uint64_t)((double)ms * 1e6) : 0;
  }
  uint64_t word = 0;
  rc = hbg_dev_copy_d2h(p->dev, &word, p->status, sizeof word);
  if (rc)
    return pe_note(p, rc);
  if (word) {
    int32_t err = hbg_dc_node_status_error(word);
    uint32_t i = hbg_dc_node_status_index(word);
    const hbg_workload_node *nd = i < p->n ? &p->calls[i] : NULL;
    hbg__error_set("peer %s: step %u: the device rejected call %u (task "
                   "%u, kernel %u): %s",
                   p->src.name, p->step, i,
                   nd ? nd->task : UINT32_MAX, nd ? nd->kernel : UINT32_MAX,
                   hbg_strerror(err));
    static const uint64_t zero = 0;
    int r2 = hbg_dev_copy_h2d(p->dev, p->status, &zero, sizeof zero);
    return r2 ? pe_note(p, r2) : (err < 0 ? err : HBG_E_DEVICE);
  }
  if (st) {
    uint32_t want = st->struct_size;
    hbg_peer_stats s = p->st;
    s.struct_size = (uint32_t)HBG__MIN((size_t)want, sizeof s);
    memcpy(st, &s, s.struct_size);
  }
out:
  return rc;
}

static void cu_peer_destroy(void *pv) {
  cu_peer *p = pv;
  if (!p)
    return;
  hbg__cuda *c = p->c;
  (void)hbg__cu_enter(p->dev, c);
  if (p->s)
    (void)c->f.cuStreamSynchronize(p->s);
  pe_graph_drop(p);
  if (p->e1)
    (void)c->f.cuEventDestroy_v2(p->e1);
  if (p->e0)
    (void)c->f.cuEventDestroy_v2(p->e0);
  if (p->s)
    (void)c->f.cuStreamDestroy_v2(p->s);
  (void)hbg_dev_mem_free(p->dev, p->status);
  (void)hbg_dev_mem_free(p->dev, p->scratch);
  (void)hbg_dev_mem_free(p->dev, p->heap);
  free(p->held);
  free(p->gnode);
  free(p->args);
  free(p->calls);
  free(p);
}

/* The kernel-node calls cuda-graph needs, or the first one missing. */
static const char *pe_graph_missing(const hbg__cuda *c) {
  if (!c->f.cuGraphGetNodes)
    return "cuGraphGetNodes";
  if (!c->f.cuGraphKernelNodeGetParams_v2)
    return "cuGraphKernelNodeGetParams_v2";
  if (!c->f.cuGraphExecKernelNodeSetParams_v2)
    return "cuGraphExecKernelNodeSetParams_v2";
  return NULL;
}

static int cu_peer_create(hbg_device *dev, const hbg__peer_src *src,
                          int kind, void **out) {
  hbg__cuda *c = hbg_device_impl(dev);
  const char *missing = kind == HBG_PEER_CUDA_GRAPH ? pe_graph_missing(c)
                                                    : NULL;
  if (missing) {
    hbg__error_set("peer cuda-graph: the CUDA driver library lacks %s "
                   "(kernel-node updates need a CUDA 12.0 or newer driver)",
                   missing);
    return HBG_E_UNSUPPORTED;
  }
  cu_peer *p = calloc(1, sizeof *p);
  if (!p)
    return HBG_E_NOMEM;
  p->src = *src;
  p->dev = dev;
  p->c = c;
  p->kind = kind;
  p->timed = c->f.cuEventElapsedTime_v2 != NULL;
  int rc = hbg__cu_enter(dev, c);
  if (rc)
    goto err;
  int max_block = 0;
  PE_CU(p, err, rc, cuDeviceGetAttribute, &max_block,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, c->cudev);
  p->lanes = (unsigned)HBG__MAX(HBG__MIN((int)PEER_LANES, max_block), 1);
  PE_CU(p, err, rc, cuStreamCreate, &p->s, CU_STREAM_NON_BLOCKING);
  unsigned ef = p->timed ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING;
  PE_CU(p, err, rc, cuEventCreate, &p->e0, ef);
  PE_CU(p, err, rc, cuEventCreate, &p->e1, ef);
  rc = hbg_dev_mem_alloc(dev, HBG__MAX(src->node_heap_bytes, (uint64_t)64),
                         &p->heap);
  if (rc == 0)
    rc = hbg_dev_mem_alloc(dev, sizeof(uint64_t), &p->status);
  static const uint64_t zero = 0;
  if (rc == 0)
    rc = hbg_dev_copy_h2d(dev, p->status, &zero, sizeof zero);
  if (rc)
    goto err_dev;
  /* Kernel scratch: the largest any call of a step needs (shapes are the
   * same every step). */
  rc = pe_nodes(p, 0);
  if (rc)
    goto err;
  uint64_t floats = 64;
  for (uint32_t i = 0; i < p->n; i++)
    floats = HBG__MAX(floats, pe_scratch_floats(&p->calls[i]));
  p->scratch_floats = floats;
  rc = hbg_dev_mem_alloc(dev, floats * sizeof(float), &p->scratch);
  if (rc)
    goto err_dev;
  *out = p;
  return 0;

err_dev:
  (void)pe_note(p, rc);
err:
  cu_peer_destroy(p);
  return rc;
}

const hbg__peer_ops hbg__cu_peer_ops = {
    .create = cu_peer_create,
    .launch = cu_peer_launch,
    .wait = cu_peer_wait,
    .destroy = cu_peer_destroy,
};
