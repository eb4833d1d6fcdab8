/* The embedded sim device: open/close, options, capabilities, counters and
 * the ops table. Memory lives in sim_heap.c and sim_host.c, the copy engine,
 * scheduler, queues and events in sim_engine.c. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/util.h"
#include "device/kernel_reg.h"
#include "device/sim/sim_internal.h"

#define SIM_DEFAULT_MEM (UINT64_C(256) << 20)
#define SIM_DEFAULT_CHUNK (UINT64_C(64) << 10)
#define SIM_DEFAULT_WORKERS 2
#define SIM_DEFAULT_SPIN_US 200
#define SIM_MAX_SPIN_US 100000
#define SIM_MAX_WORKERS 256
#define SIM_MAX_LANES 1024

/* Address tags of the open sims (process-wide, lock-free): bit t - 1 set
 * while a sim owns tag t (1..255), so that no two open sims share one and
 * an address of one is never taken for memory of another. */
#define SIM_TAGS 255u
static _Atomic uint64_t sim_tags[(SIM_TAGS + 63) / 64];

/* @return a free tag 1..255 (now taken), or 0 when every one is. */
static uint32_t tag_take(void) {
  for (uint32_t w = 0; w < HBG__ARRAY_LEN(sim_tags); w++) {
    uint64_t cur = atomic_load(&sim_tags[w]);
    for (;;) {
      uint32_t room = HBG__MIN(64u, SIM_TAGS - 64u * w);
      uint64_t usable = room == 64 ? ~UINT64_C(0) : (UINT64_C(1) << room) - 1;
      uint64_t free_bits = ~cur & usable;
      if (!free_bits)
        break;
      uint64_t bit = free_bits & (~free_bits + 1);
      if (atomic_compare_exchange_weak(&sim_tags[w], &cur, cur | bit))
        return 64u * w + (uint32_t)__builtin_ctzll(bit) + 1u;
    }
  }
  return 0;
}

static void tag_give(uint32_t tag) {
  uint32_t i = tag - 1;
  atomic_fetch_and(&sim_tags[i / 64], ~(UINT64_C(1) << (i % 64)));
}

typedef struct sim_opts {
  uint64_t mem, chunk, workers, spin, lanes;
  hbg__sim_model model; /* the profile's, then the cost keys over it */
  hbg__sim_model over;  /* cost keys given */
  uint32_t over_mask;   /* which */
  const char *profile;
  int vclock; /* clock=virtual */
} sim_opts;

static int opt_fail(hbg_device *dev, const char *what, const char *tok,
                    size_t n) {
  hbg_device_set_native(dev, HBG_E_INVAL, "%s '%.*s'", what, (int)n,
                        tok);
  return HBG_E_INVAL;
}

static int parse_opts(hbg_device *dev, const char *opts, sim_opts *o) {
  static const struct {
    const char *key;
    size_t off;
    uint64_t min, max;
  } keys[] = {
      {"mem", offsetof(sim_opts, mem), HBG__SIM_MEM_MIN, HBG__SIM_MEM_MAX},
      {"chunk", offsetof(sim_opts, chunk), HBG__SIM_CHUNK_MIN,
       HBG__SIM_CHUNK_MAX},
      {"workers", offsetof(sim_opts, workers), 1, SIM_MAX_WORKERS},
      {"spin", offsetof(sim_opts, spin), 0, SIM_MAX_SPIN_US},
      {"lanes", offsetof(sim_opts, lanes), 1, SIM_MAX_LANES},
  };
  for (const char *p = opts; p && *p;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n) {
      const char *eq = memchr(p, '=', n);
      if (!eq)
        return opt_fail(dev, "option is not key=value:", p, n);
      size_t klen = (size_t)(eq - p), vlen = n - klen - 1;
      if (klen == 5 && !memcmp(p, "clock", 5)) {
        if (vlen == 4 && !memcmp(eq + 1, "real", 4))
          o->vclock = 0;
        else if (vlen == 7 && !memcmp(eq + 1, "virtual", 7))
          o->vclock = 1;
        else
          return opt_fail(dev, "unknown clock (real, virtual) in", p, n);
        p = end ? end + 1 : p + n;
        continue;
      }
      if (klen == 7 && !memcmp(p, "profile", 7)) {
        if (hbg__sim_profile(eq + 1, vlen, &o->model, &o->profile) < 0)
          return opt_fail(dev, "unknown profile (none, ascend-a2, "
                               "h200-pcie5) in", p, n);
        p = end ? end + 1 : p + n;
        continue;
      }
      uint32_t bit;
      int mk = hbg__sim_model_key(p, klen, eq + 1, vlen, &o->over, &bit);
      if (mk < 0)
        return opt_fail(dev, "bad or out-of-range value in", p, n);
      if (mk > 0) {
        o->over_mask |= bit;
        p = end ? end + 1 : p + n;
        continue;
      }
      size_t k = 0;
      while (k < HBG__ARRAY_LEN(keys) &&
             (strlen(keys[k].key) != klen || memcmp(keys[k].key, p, klen)))
        k++;
      if (k == HBG__ARRAY_LEN(keys))
        return opt_fail(dev, "unknown option", p, klen);
      char buf[32];
      uint64_t v;
      if (vlen >= sizeof buf)
        return opt_fail(dev, "bad value in", p, n);
      memcpy(buf, eq + 1, vlen);
      buf[vlen] = '\0';
      if (hbg__parse_u64(buf, &v) < 0 || v < keys[k].min || v > keys[k].max)
        return opt_fail(dev, "bad or out-of-range value in", p, n);
      memcpy((char *)o + keys[k].off, &v, sizeof v);
    }
    p = end ? end + 1 : p + n;
  }
  hbg__sim_model_apply(&o->model, &o->over, o->over_mask);
  return 0;
}

static int bounce_init(hbg__sim *s) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t half = HBG__ALIGN_UP((size_t)s->chunk, page);
  void *p = mmap(NULL, 2 * half, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    hbg_device_set_native(s->dev, errno, "cannot map bounce buffers: %s",
                          strerror(errno));
    return HBG_E_NOMEM;
  }
  s->bounce[0] = p;
  s->bounce[1] = (uint8_t *)p + half;
  s->bounce_map = 2 * half;
  s->bounce_locked = hbg__sim_try_lock(s, p, 2 * half);
  return 0;
}

static void bounce_fini(hbg__sim *s) {
  if (s->bounce_locked)
    munlock(s->bounce[0], s->bounce_map);
  munmap(s->bounce[0], s->bounce_map);
}

/* The executor's way into device memory (hbg__exec_mem). */
static int exec_resolve(void *ctx, hbg_devptr base, uint64_t off,
                        uint64_t len, void **out) {
  return hbg__sim_resolve_in(ctx, base, off, len, out);
}

static int sim_open(hbg_device *dev, const char *options) {
  sim_opts o = {.mem = SIM_DEFAULT_MEM,
                .chunk = SIM_DEFAULT_CHUNK,
                .workers = SIM_DEFAULT_WORKERS,
                .spin = SIM_DEFAULT_SPIN_US,
                .lanes = 1,
                .profile = "none"};
  HBG__TRY(parse_opts(dev, options, &o));
  hbg__sim *s = calloc(1, sizeof *s);
  if (!s)
    return HBG_E_NOMEM;
  s->dev = dev;
  s->chunk = o.chunk;
  s->workers = (uint32_t)o.workers;
  s->spin_ns = o.spin * 1000;
  s->model = o.model;
  s->profile = o.profile;
  s->vclock = o.vclock;
  atomic_init(&s->v_off, 0);
  uint32_t tag = tag_take();
  if (!tag) {
    free(s);
    hbg_device_set_native(dev, HBG_E_LIMIT,
                          "sim: %u sim devices are open in this process "
                          "already (each needs its own address tag)",
                          SIM_TAGS);
    return HBG_E_LIMIT;
  }
  s->tag = HBG__SIM_TAG_BASE | ((uint64_t)tag << HBG__SIM_OFF_BITS);

  int rc = hbg__sim_heap_init(s, o.mem);
  if (rc < 0)
    goto err_sim;
  rc = hbg__sim_host_init(s);
  if (rc < 0)
    goto err_heap;
  rc = bounce_init(s);
  if (rc < 0)
    goto err_host;
  const hbg__exec_mem mem = {.resolve = exec_resolve, .ctx = s};
  rc = hbg__exec_create(&mem, s->workers, (uint32_t)o.lanes, &s->exec);
  if (rc < 0) {
    const char *why = hbg_last_error();
    hbg_device_set_native(dev, rc, "cannot create the executor: %s",
                          why[0] ? why : hbg_strerror(rc));
    goto err_bounce;
  }
  rc = hbg__sim_engine_start(s);
  if (rc < 0)
    goto err_exec;
  hbg_device_set_impl(dev, s);
  return 0;

err_exec:
  hbg__exec_destroy(s->exec);
err_bounce:
  bounce_fini(s);
err_host:
  hbg__sim_host_fini(s);
err_heap:
  hbg__sim_heap_fini(s);
err_sim:
  tag_give(tag);
  free(s);
  return rc;
}

static void sim_close(hbg_device *dev) {
  hbg__sim *s = hbg_device_impl(dev);
  if (!s)
    return;
  hbg__sim_engine_stop(s);
  hbg__exec_destroy(s->exec);
  bounce_fini(s);
  hbg__sim_host_fini(s);
  hbg__sim_heap_fini(s);
  tag_give((uint32_t)((s->tag >> HBG__SIM_OFF_BITS) & 0xff));
  free(s);
  hbg_device_set_impl(dev, NULL);
}

static int sim_get_caps(hbg_device *dev, hbg_dev_caps *caps) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!caps, HBG_E_INVAL);
  memset(caps, 0, sizeof *caps);
  caps->struct_size = sizeof *caps;
  caps->flags = HBG_DEV_CAP_EXECUTES | HBG_DEV_CAP_HOST_REGISTER |
                HBG_DEV_CAP_ASYNC_NEEDS_PINNED;
  caps->stage_align = 64;
  caps->piece_pad_align = 1;
  caps->piece_pad_extra = 0;
  caps->dev_align = HBG__SIM_DEV_ALIGN;
  caps->max_batch = 0;
  caps->mem_bytes = s->heap_bytes;
  return 0;
}

static int sim_clock_ns(hbg_device *dev, uint64_t *ns) {
  *ns = hbg__sim_vnow(hbg_device_impl(dev));
  return 0;
}

static int sim_get_stats(hbg_device *dev, hbg_dev_stats *st) {
  hbg__sim *s = hbg_device_impl(dev);
  HBG__RETURN_IF(!st, HBG_E_INVAL);
  memset(st, 0, sizeof *st);
  st->struct_size = sizeof *st;
#define SIM_STAT(f) st->f = HBG__SIM_GET(s, f)
  SIM_STAT(h2d_copies);
  SIM_STAT(h2d_bytes);
  SIM_STAT(d2h_copies);
  SIM_STAT(d2h_bytes);
  SIM_STAT(async_copies);
  SIM_STAT(async_degraded);
  SIM_STAT(pinned_direct);
  SIM_STAT(bounce_chunks);
  SIM_STAT(handshakes);
  SIM_STAT(mem_allocs);
  SIM_STAT(mem_frees);
  SIM_STAT(mem_in_use);
  SIM_STAT(host_allocs);
  SIM_STAT(host_frees);
  SIM_STAT(host_in_use);
  SIM_STAT(launches);
#undef SIM_STAT
  return 0;
}

const hbg_dev_ops hbg__sim_ops = {
    .struct_size = sizeof(hbg_dev_ops),
    .abi_version = HBG_DEV_ABI_VERSION,
    .name = "sim",
    .summary = "embedded simulated device: own memory heap, copy-engine "
               "thread, CPU scheduler (options mem=,chunk=,workers=,spin=us,"
               "lanes=; "
               "cost model profile=none|ascend-a2|h200-pcie5 with overrides "
               "copy_us=,h2d_gbps=,pageable_gbps=,chunk_us=,alloc_us=,"
               "free_us=,free_sync=0|1,launch_us=; clock=real|virtual: "
               "modelled costs slept, or added to a virtual device clock)",
    .probe = NULL,
    .open = sim_open,
    .close = sim_close,
    .get_caps = sim_get_caps,
    .get_stats = sim_get_stats,
    .host_alloc = hbg__sim_host_alloc,
    .host_free = hbg__sim_host_free,
    .host_register = hbg__sim_host_register,
    .host_unregister = hbg__sim_host_unregister,
    .mem_alloc = hbg__sim_mem_alloc,
    .mem_free = hbg__sim_mem_free,
    .copy_h2d = hbg__sim_copy_h2d,
    .copy_d2h = hbg__sim_copy_d2h,
    .queue_create = hbg__sim_queue_create,
    .queue_destroy = hbg__sim_queue_destroy,
    .copy_h2d_async = hbg__sim_copy_h2d_async,
    .queue_sync = hbg__sim_queue_sync,
    .event_create = hbg__sim_event_create,
    .event_destroy = hbg__sim_event_destroy,
    .event_record = hbg__sim_event_record,
    .event_query = hbg__sim_event_query,
    .event_wait = hbg__sim_event_wait,
    .event_elapsed = hbg__sim_event_elapsed,
    .launch = hbg__sim_launch,
    .clock_ns = sim_clock_ns,
    .queue_wait_event = hbg__sim_queue_wait_event,
    .mem_import = hbg__sim_mem_import,
    .mem_unimport = hbg__sim_mem_unimport,
    .queue_borrow = hbg__sim_queue_borrow,
    .queue_unborrow = hbg__sim_queue_unborrow,
};

static int sim_host_ptr(hbg_device *dev, hbg_devptr addr, uint64_t len,
                        void **out) {
  return hbg__sim_resolve(hbg_device_impl(dev), addr, len, out);
}

const hbg__backend hbg__sim_backend = {
    .ops = &hbg__sim_ops,
    .kernel_register = hbg__sim_kernel_register,
    .host_ptr = sim_host_ptr,
};

hbg__sim *hbg__sim_from(hbg_device *dev) {
  dev = hbg__dev_base(dev);
  return dev && dev->ops == &hbg__sim_ops ? dev->impl : NULL;
}

int hbg__sim_get_info(hbg__sim *s, hbg__sim_info *out) {
  HBG__RETURN_IF(!s || !out, HBG_E_INVAL);
  hbg__sim_info in;
  memset(&in, 0, sizeof in);
  in.mem_bytes = s->heap_bytes;
  in.chunk_bytes = s->chunk;
  in.workers = s->workers;
  in.spin_us = s->spin_ns / 1000;
  in.spin_hits = HBG__SIM_GET(s, spin_hits);
  in.sleeps = HBG__SIM_GET(s, sleeps);
  in.modelled = HBG__SIM_GET(s, modelled);
  in.modelled_ns = HBG__SIM_GET(s, modelled_ns);
  in.model = s->model;
  in.profile = s->profile;
  in.tag = s->tag;
  pthread_rwlock_rdlock(&s->heap_lock);
  in.free_bytes = s->heap_free;
  in.free_extents = s->free_ext.n;
  in.live_allocs = s->live.n;
  in.imports = s->imports.n;
  for (size_t i = 0; i < s->imports.n; i++)
    in.import_bytes += s->imports.v[i].len;
  pthread_rwlock_unlock(&s->heap_lock);
  pthread_mutex_lock(&s->reg_mu);
  in.registrations = s->reg.n;
  for (size_t i = 0; i < s->reg.n; i++)
    if (s->reg.v[i].flags & HBG__SIM_REG_LOCKED)
      in.locked++;
  pthread_mutex_unlock(&s->reg_mu);
  pthread_mutex_lock(&s->mu);
  for (hbg__sim_queue *q = s->queues; q; q = q->next)
    in.queues++;
  for (hbg__sim_event *ev = s->events; ev; ev = ev->next)
    in.events++;
  pthread_mutex_unlock(&s->mu);
  in.mlock_failed = HBG__SIM_GET(s, mlock_failed);
  in.bounce_locked = (uint32_t)s->bounce_locked;
  *out = in;
  return 0;
}
