#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/policy/policy.h"
#include "device/device.h"

void hbg__trace(hbg_runtime *rt, uint32_t track, const char *name,
                uint64_t start, uint64_t end, uint64_t bytes, uint64_t seq) {
  if (!rt->trace_fn)
    return;
  hbg_trace_event ev = {.track = track,
                        .name = name,
                        .start_ns = start,
                        .dur_ns = end > start ? end - start : 0,
                        .bytes = bytes,
                        .bind_seq = seq};
  rt->trace_fn(rt->trace_user, &ev);
}

/* A device call of runtime creation failed: name it and what it was making
 * in hbg_last_error(), with the device's own words. @return rc. */
static int create_failed(hbg_runtime *rt, int rc, const char *call,
                         const char *what, uint32_t slot) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s", hbg__native_why(rt, rc));
  hbg__error_set("hbg_runtime_create: %s for the %s of pipeline slot %u "
                 "failed: %s: %s",
                 call, what, slot, hbg_err_name(rc), msg);
  return rc;
}

int hbg__status_word_new(hbg_runtime *rt, hbg__slot *s) {
  hbg_devptr d = 0;
  int rc = hbg_dev_mem_alloc(rt->dev, sizeof(hbg_dev_status), &d);
  if (rc < 0) {
    create_failed(rt, rc, "mem_alloc", "device status word", s->index);
    return rc;
  }
  /* A backend built before the status grew writes only its first fields:
   * the rest (flags) must read 0, not whatever the allocation held. */
  static const hbg_dev_status zero;
  rc = hbg_dev_copy_h2d(rt->dev, d, &zero, sizeof zero);
  if (rc < 0) {
    create_failed(rt, rc, "copy_h2d", "device status word", s->index);
    hbg__mem_release(rt, d, "device status word");
    return rc;
  }
  s->status_dev = d;
  return 0;
}

int hbg__slot_init(hbg_runtime *rt, hbg__slot *s, uint32_t index) {
  memset(s, 0, sizeof *s);
  s->index = index;
  s->bind.rt = rt;
  s->bind.slot = s;
  int rc = hbg_dev_queue_create(rt->dev, &s->q);
  if (rc < 0) {
    create_failed(rt, rc, "queue_create", "queue", index);
    goto err;
  }
  rc = hbg_dev_event_create(rt->dev, &s->done);
  if (rc < 0) {
    create_failed(rt, rc, "event_create", "completion event", index);
    goto err;
  }
  if (hbg__dev_times_events(rt->dev)) {
    rc = hbg_dev_event_create(rt->dev, &s->start);
    if (rc < 0) {
      create_failed(rt, rc, "event_create", "start event", index);
      goto err;
    }
  }
  /* A policy that stages in heap memory only keeps no arena. */
  if (rt->ops->arena) {
    rc = hbg__arena_reserve(rt, s, rt->cfg.arena_bytes);
    if (rc < 0) {
      int64_t code = rc;
      const char *why = NULL;
      if (hbg_device_native_error(rt->dev, &code, &why) < 0 || !why)
        why = hbg_strerror(rc);
      char msg[256];
      snprintf(msg, sizeof msg, "%s", why);
      hbg_device_set_native(rt->dev, code,
                            "pinned staging arena of %llu bytes per slot "
                            "(arena_bytes / HBG_ARENA_BYTES): %s",
                            (unsigned long long)rt->cfg.arena_bytes, msg);
      hbg__error_set("pinned staging arena of %llu bytes per slot "
                     "(arena_bytes / HBG_ARENA_BYTES): %s",
                     (unsigned long long)rt->cfg.arena_bytes, msg);
      goto err;
    }
  }
  rc = hbg__status_word_new(rt, s);
  if (rc < 0)
    goto err;
  if ((rc = hbg__map_init(&s->retained, sizeof(hbg__retained), 64)) < 0 ||
      (rc = hbg__map_init(&s->rkeys, sizeof(hbg__rkey), 16)) < 0 ||
      (rc = hbg__map_init(&s->bind.occ, sizeof(hbg__occ), 16)) < 0) {
    hbg__error_set("hbg_runtime_create: out of host memory for the tables "
                   "of pipeline slot %u", index);
    goto err;
  }
  return 0;
err:
  hbg__slot_fini(rt, s);
  return rc;
}

int hbg__slot_drain(hbg_runtime *rt, hbg__slot *s) {
  /* A bind launched on a caller's queue: its completion event is there. */
  if (s->in_flight && s->last_q && s->last_q != s->q)
    HBG__TRY(hbg_dev_event_wait(rt->dev, s->done));
  int rc = hbg_dev_queue_sync(rt->dev, s->q);
  if (rc == 0)
    return 0;
  /* An event recorded behind the queued work completes after it; failing
   * that, a launched bind's own completion event. */
  if (hbg_dev_event_record(rt->dev, s->done, s->q) == 0 || s->in_flight)
    rc = hbg_dev_event_wait(rt->dev, s->done);
  return rc;
}

/* Reverse order of creation. */
void hbg__slot_fini(hbg_runtime *rt, hbg__slot *s) {
  hbg_bind *b = &s->bind;
  /* A launched bind, or async chunks of an open one, may still read the
   * arena and the window buffer. */
  if (s->q && (s->in_flight || b->win_flushed || s->undrained))
    hbg__slot_drain(rt, s);
  s->in_flight = 0;
  s->undrained = 0;
  hbg__bind_reset(b);
  s->arena.high_water = 0; /* no growth at teardown */
  s->heap_high_water = 0;
  s->bulk_high_water = 0;
  s->win_high_water = 0;
  hbg__slot_reclaim(rt, s);
  /* What the policy retains was made during binds, after everything
   * below: it goes first. */
  if (rt->ops->fini)
    rt->ops->fini(rt, s);
  free(b->win.p && !b->win.pinned ? b->win.p : NULL);
  free(b->index);
  free(b->bext);
  free(b->pend);
  hbg__map_free(&b->occ);
  hbg__deps_free(&b->deps);
  hbg__map_free(&s->retained);
  hbg__map_free(&s->rkeys);
  for (uint32_t i = 0; i < s->n_heap_extra; i++)
    hbg__mem_release(rt, s->heap_extra[i], "extra heap block");
  free(s->heap_extra);
  hbg__mem_release(rt, s->heap_dev, "heap block");
  hbg__mem_release(rt, s->win_dev, "window buffer");
  hbg__mem_release(rt, s->status_dev, "status word");
  hbg__arena_release(rt, s);
  if (s->start)
    hbg__release_failed(rt, hbg_dev_event_destroy(rt->dev, s->start),
                        "event_destroy", "start event",
                        (uint64_t)(uintptr_t)s->start);
  if (s->done)
    hbg__release_failed(rt, hbg_dev_event_destroy(rt->dev, s->done),
                        "event_destroy", "completion event",
                        (uint64_t)(uintptr_t)s->done);
  if (s->q)
    hbg__release_failed(rt, hbg_dev_queue_destroy(rt->dev, s->q),
                        "queue_destroy", "queue", (uint64_t)(uintptr_t)s->q);
  memset(s, 0, sizeof *s);
}

int hbg_runtime_create(const hbg_config *cfg, hbg_runtime **out) {
  hbg__error_clear();
  HBG__RETURN_IF(!out, HBG_E_INVAL);
  hbg_config def;
  if (!cfg) {
    hbg_config_init(&def);
    cfg = &def;
  }
  HBG__TRY(hbg__config_check(cfg));

  hbg_runtime *rt = calloc(1, sizeof *rt);
  if (!rt)
    return HBG_E_NOMEM;
  /* A caller's struct may end before the fields appended later: those
   * keep their defaults (0). */
  memcpy(&rt->cfg, cfg, cfg->struct_size);
  rt->cfg.struct_size = sizeof rt->cfg;
  rt->ops = hbg__policies[rt->cfg.policy];
  if (!rt->cfg.arena_bytes)
    rt->cfg.arena_bytes = 16u << 20;
  rt->depth = rt->cfg.pipeline_depth ? rt->cfg.pipeline_depth : 2;
  rt->cfg.pipeline_depth = rt->depth;
  rt->graph_max = rt->cfg.graph_cache_max ? rt->cfg.graph_cache_max
                                          : HBG__GRAPH_CACHE_DEFAULT;
  rt->cfg.graph_cache_max = rt->graph_max;
  rt->cfg.device_handle = NULL;
  rt->cfg.device = NULL;
  rt->cfg.device_options = NULL;

  int rc;
  if (cfg->device_handle) {
    rt->dev = cfg->device_handle;
  } else {
    rc = hbg_device_open(cfg->device, cfg->device_options, &rt->dev);
    if (rc < 0) {
      const char *env = getenv("HBG_DEVICE_OPTIONS");
      if (env && env == cfg->device_options) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", hbg_last_error());
        hbg__error_set("HBG_DEVICE_OPTIONS='%s': %s", env, msg);
      }
      goto err_rt;
    }
    rt->own_dev = 1;
  }
  rt->caps.struct_size = sizeof rt->caps;
  rc = hbg_dev_caps_get(rt->dev, &rt->caps);
  if (rc < 0)
    goto err_dev;
  rc = hbg__map_init(&rt->graphs, sizeof(hbg__graph), 64);
  if (rc < 0)
    goto err_dev;
  rc = hbg__map_init(&rt->resident, sizeof(hbg__resident), 64);
  if (rc < 0)
    goto err_graphs;
  rt->slots = calloc(rt->depth, sizeof *rt->slots);
  if (!rt->slots || hbg__capture_home_new(rt) < 0) {
    rc = HBG_E_NOMEM;
    goto err_resident;
  }
  uint32_t i;
  for (i = 0; i < rt->depth; i++) {
    rc = hbg__slot_init(rt, &rt->slots[i], i);
    if (rc < 0)
      goto err_slots;
  }
  *out = rt;
  return 0;

err_slots:
  while (i-- > 0)
    hbg__slot_fini(rt, &rt->slots[i]);
err_resident:
  free(rt->slots);
  hbg__captures_fini(rt);
  hbg__map_free(&rt->resident);
err_graphs:
  hbg__map_free(&rt->graphs);
err_dev:
  if (rt->own_dev)
    hbg_device_close(rt->dev);
err_rt:
  free(rt);
  return rc;
}

void hbg_runtime_destroy(hbg_runtime *rt) {
  if (!rt)
    return;
  rt->rel_failed = 0;
  /* Every queue idle before any slot's events go: a slot's queue may wait
   * on another slot's completion event (launch order). */
  for (uint32_t i = 0; i < rt->depth; i++) {
    hbg__slot *s = &rt->slots[i];
    if (s->q && (s->in_flight || s->bind.win_flushed || s->undrained))
      hbg__slot_drain(rt, s);
  }
  /* The caller's queues are idle as far as hbg is concerned: forget them
   * before the slots' events go. */
  hbg__borrowed_fini(rt);
  for (uint32_t i = rt->depth; i-- > 0;)
    hbg__slot_fini(rt, &rt->slots[i]);
  free(rt->slots);
  /* Snapshots whose graphs are gone; the live ones' memory stays. */
  hbg__captures_fini(rt);
  /* Every slot was reclaimed: nothing retired is still read. */
  for (uint32_t i = 0; i < rt->n_retired; i++)
    hbg__mem_release(rt, rt->retired[i].dev, "retired buffer");
  free(rt->retired);
  for (uint32_t i = 0; i < rt->resident.cap; i++) {
    hbg__resident *r = hbg__map_at(&rt->resident, i);
    if (r)
      hbg__mem_release(rt, r->dev, "resident definition");
  }
  hbg__map_free(&rt->resident);
  hbg__graphs_clear(rt);
  hbg__map_free(&rt->graphs);
  /* The caller's buffers still live (never freed, or kept by a free whose
   * wait failed) go too, whatever failed above: on a device the caller
   * keeps open nothing else would ever free them. Last, so that each
   * slot's own drain has been tried. */
  for (size_t i = 0; i < rt->bufs.n; i++) {
    const hbg__range *r = &rt->bufs.v[i];
    if (r->kind == HBG__BUF_IMPORT) /* the caller's memory: forgotten */
      hbg__release_failed(rt, hbg_dev_mem_unimport(rt->dev, r->start),
                          "mem_unimport", "imported buffer", r->start);
    else
      hbg__mem_release(rt, r->start, "user buffer");
  }
  hbg__rtab_free(&rt->bufs);
  if (rt->trace_fn)
    hbg_device_set_trace(rt->dev, NULL, NULL);
  if (rt->rel_failed)
    hbg__error_set("hbg_runtime_destroy: %u release%s failed (each "
                   "counted in hbg_dev_stats.free_failures); the first: %s",
                   rt->rel_failed, rt->rel_failed > 1 ? "s" : "",
                   rt->rel_first);
  if (rt->own_dev)
    hbg_device_close(rt->dev);
  free(rt);
}

struct hbg_device *hbg_runtime_device(hbg_runtime *rt) {
  return rt ? rt->dev : NULL;
}

int hbg_runtime_policy(const hbg_runtime *rt) {
  return rt ? (int)rt->cfg.policy : HBG_E_INVAL;
}

int hbg_runtime_deps(const hbg_runtime *rt) {
  return rt ? (int)rt->cfg.deps : HBG_E_INVAL;
}

int hbg_runtime_last_native_error(hbg_runtime *rt, int64_t *code,
                                  const char **msg) {
  HBG__RETURN_IF(!rt, HBG_E_INVAL);
  return hbg_device_native_error(rt->dev, code, msg);
}

int hbg_runtime_set_trace(hbg_runtime *rt, hbg_trace_fn fn, void *user) {
  HBG__RETURN_IF(!rt, HBG_E_INVAL);
  HBG__GUARD(rt, "hbg_runtime_set_trace");
  rt->trace_fn = fn;
  rt->trace_user = fn ? user : NULL;
  hbg_device_set_trace(rt->dev, fn, fn ? user : NULL);
  return 0;
}

int hbg_buffer_alloc(hbg_runtime *rt, uint64_t bytes, uint64_t *out) {
  HBG__RETURN_IF(!rt || !out || bytes == 0, HBG_E_INVAL);
  HBG__GUARD(rt, "hbg_buffer_alloc");
  HBG__TRY(hbg__rtab_reserve(&rt->bufs, rt->bufs.n + 1));
  hbg_devptr d = 0;
  HBG__TRY(hbg_dev_mem_alloc(rt->dev, (size_t)bytes, &d));
  hbg__rtab_insert_at(&rt->bufs, hbg__rtab_upper(&rt->bufs, d),
                      (hbg__range){.start = d, .len = bytes});
  *out = d;
  return 0;
}

/* Wait until every launched bind of rt has completed (the device is not
 * told which buffers a bind uses). @return 0, or the first failed wait's
 * error, named in hbg_last_error() for call. */
static int wait_launched(hbg_runtime *rt, const char *call) {
  for (uint32_t i = 0; i < rt->depth; i++) {
    hbg__slot *s = &rt->slots[i];
    if (!s->in_flight)
      continue;
    int rc = hbg_dev_event_wait(rt->dev, s->done);
    if (rc < 0) {
      hbg__error_set("%s: waiting for bind %llu (pipeline slot %u) in "
                     "flight failed: %s; nothing was done",
                     call, (unsigned long long)s->bind.seq, s->index,
                     hbg_err_name(rc));
      return rc;
    }
  }
  return 0;
}


int hbg_buffer_import(hbg_runtime *rt, uint64_t addr, uint64_t bytes,
                      uint64_t *out) {
  hbg__error_clear();
  HBG__RETURN_IF(!rt || !out, HBG_E_INVAL);
  if (!addr || !bytes || bytes > UINT64_MAX - addr || bytes > SIZE_MAX) {
    hbg__error_set("hbg_buffer_import: 0x%llx, %llu bytes: %s; nothing "
                   "imported",
                   (unsigned long long)addr, (unsigned long long)bytes,
                   !addr    ? "a NULL address"
                   : !bytes ? "0 bytes"
                            : "the range wraps around the address space");
    return HBG_E_INVAL;
  }
  HBG__GUARD(rt, "hbg_buffer_import");
  HBG__TRY(hbg__rtab_reserve(&rt->bufs, rt->bufs.n + 1));
  hbg_devptr d = 0;
  int rc = hbg_dev_mem_import(rt->dev, addr, (size_t)bytes, &d);
  if (rc < 0) {
    char why[256];
    snprintf(why, sizeof why, "%s", hbg__native_why(rt, rc));
    hbg__error_set("hbg_buffer_import: 0x%llx, %llu bytes on device %s: "
                   "%s: %s; nothing imported",
                   (unsigned long long)addr, (unsigned long long)bytes,
                   hbg_device_name(rt->dev), hbg_err_name(rc), why);
    return rc;
  }
  /* The device refuses what overlaps its own registry; this runtime's
   * table is checked too, whatever the device does. */
  size_t at = hbg__rtab_upper(&rt->bufs, d);
  const hbg__range *hit = NULL;
  if (at > 0 && d - rt->bufs.v[at - 1].start < rt->bufs.v[at - 1].len)
    hit = &rt->bufs.v[at - 1];
  else if (at < rt->bufs.n && rt->bufs.v[at].start - d < bytes)
    hit = &rt->bufs.v[at];
  if (hit) {
    hbg__error_set("hbg_buffer_import: 0x%llx, %llu bytes (device 0x%llx) "
                   "overlaps the live %s buffer at 0x%llx, %llu bytes; "
                   "nothing imported",
                   (unsigned long long)addr, (unsigned long long)bytes,
                   (unsigned long long)d,
                   hit->kind == HBG__BUF_IMPORT ? "imported" : "allocated",
                   (unsigned long long)hit->start,
                   (unsigned long long)hit->len);
    (void)hbg_dev_mem_unimport(rt->dev, d);
    return HBG_E_INVAL;
  }
  hbg__rtab_insert_at(&rt->bufs, at,
                      (hbg__range){.start = d,
                                   .len = bytes,
                                   .aux = addr,
                                   .kind = HBG__BUF_IMPORT});
  *out = d;
  return 0;
}

int hbg_buffer_host_ptr(hbg_runtime *rt, uint64_t addr, uint64_t bytes,
                        void **out) {
  hbg__error_clear();
  HBG__RETURN_IF(!rt || !out, HBG_E_INVAL);
  HBG__GUARD(rt, "hbg_buffer_host_ptr");
  if (!hbg__rtab_holds(&rt->bufs, addr, 0, bytes)) {
    hbg__error_set("hbg_buffer_host_ptr: [0x%llx, +%llu) is not inside one "
                   "live buffer of this runtime",
                   (unsigned long long)addr, (unsigned long long)bytes);
    return HBG_E_RANGE;
  }
  void *p = NULL;
  int rc = hbg__dev_host_ptr(rt->dev, addr, bytes, &p);
  if (rc == HBG_E_UNSUPPORTED) {
    hbg__error_set("hbg_buffer_host_ptr: device %s: its memory is not "
                   "addressable from the host",
                   hbg_device_name(rt->dev));
    return rc;
  }
  if (rc < 0) {
    hbg__error_set("hbg_buffer_host_ptr: [0x%llx, +%llu) on device %s: %s",
                   (unsigned long long)addr, (unsigned long long)bytes,
                   hbg_device_name(rt->dev), hbg_err_name(rc));
    return rc;
  }
  *out = p;
  return 0;
}

int hbg_buffer_free(hbg_runtime *rt, uint64_t addr) {
  hbg__error_clear();
  HBG__RETURN_IF(!rt, HBG_E_INVAL);
  HBG__GUARD(rt, "hbg_buffer_free");
  ptrdiff_t i = hbg__rtab_floor(&rt->bufs, addr);
  if (i < 0 || rt->bufs.v[i].start != addr) {
    if (i >= 0 && addr - rt->bufs.v[i].start < rt->bufs.v[i].len)
      hbg__error_set("hbg_buffer_free: 0x%llx is %llu bytes inside the "
                     "buffer at 0x%llx, not its start; nothing freed",
                     (unsigned long long)addr,
                     (unsigned long long)(addr - rt->bufs.v[i].start),
                     (unsigned long long)rt->bufs.v[i].start);
    else
      hbg__error_set("hbg_buffer_free: 0x%llx is not a live buffer of this "
                     "runtime (freed already, another runtime's, or never "
                     "from hbg_buffer_alloc or hbg_buffer_import); nothing "
                     "freed",
                     (unsigned long long)addr);
    return HBG_E_INVAL;
  }
  HBG__TRY(wait_launched(rt, "hbg_buffer_free"));
  /* An import is the caller's memory: the device forgets it, frees
   * nothing. */
  int rc = rt->bufs.v[i].kind == HBG__BUF_IMPORT
               ? hbg_dev_mem_unimport(rt->dev, addr)
               : hbg_dev_mem_free(rt->dev, addr);
  /* a failed free is final: the buffer leaves the table all the same */
  hbg__rtab_remove_at(&rt->bufs, (size_t)i);
  return rc;
}

int hbg_buffer_write(hbg_runtime *rt, uint64_t dst, const void *src,
                     uint64_t bytes) {
  hbg__error_clear();
  HBG__RETURN_IF(!rt || !src, HBG_E_INVAL);
  HBG__GUARD(rt, "hbg_buffer_write");
  HBG__TRY(wait_launched(rt, "hbg_buffer_write"));
  return hbg_dev_copy_h2d(rt->dev, dst, src, (size_t)bytes);
}

int hbg_buffer_read(hbg_runtime *rt, void *dst, uint64_t src, uint64_t bytes) {
  hbg__error_clear();
  HBG__RETURN_IF(!rt || !dst, HBG_E_INVAL);
  HBG__GUARD(rt, "hbg_buffer_read");
  HBG__TRY(wait_launched(rt, "hbg_buffer_read"));
  return hbg_dev_copy_d2h(rt->dev, dst, src, (size_t)bytes);
}
