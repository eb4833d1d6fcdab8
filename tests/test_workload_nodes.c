/* hbg_workload_nodes: the step as a flat list of kernel calls.
 *
 * The list is the step: its calls, submitted as ordinary tasks (each
 * waiting for the one before) into one bind with the graph-internal
 * tensors in a device buffer of node_heap_bytes, write what the step's own
 * bind writes, so hbg_workload_verify passes bit for bit, for two
 * different steps (positions, cache rows and, on dsv4's MoE layers, the
 * routed experts all move with the step). Its shape is checked against
 * what the runtime really recorded: the Definitions in the graph cache
 * (node counts, heap sizes) and the bind's window (task and graph counts).
 * Then the count-only call, the cap check and the argument checks. */
#include <stdlib.h>
#include <string.h>

#include <hbg/hbg.h>
#include <hbg/hbg_workload.h>

#include "common/util.h"
#include "core/core.h"
#include "graph/graph.h"
#include "test.h"

static hbg_runtime *runtime(void) {
  hbg_config cfg;
  hbg_config_init(&cfg);
  cfg.device = "sim";
  cfg.device_options = "workers=4";
  hbg_runtime *rt;
  ASSERT_OK(hbg_runtime_create(&cfg, &rt));
  return rt;
}

static hbg_workload *workload(hbg_runtime *rt, const char *name,
                              uint32_t layers) {
  hbg_workload_config c;
  hbg_workload_config_init(&c);
  c.name = name;
  c.layers = layers;
  hbg_workload *w;
  ASSERT_OK(hbg_workload_create(rt, &c, &w));
  return w;
}

static hbg_workload_node *list(hbg_workload *w, uint32_t step, uint64_t heap,
                               uint32_t *n) {
  ASSERT_OK(hbg_workload_nodes(w, step, heap, NULL, 0, n));
  ASSERT(*n > 0);
  hbg_workload_node *v = calloc(*n, sizeof *v);
  ASSERT(v);
  uint32_t got = 0;
  ASSERT_OK(hbg_workload_nodes(w, step, heap, v, *n, &got));
  ASSERT_EQ(got, *n);
  return v;
}

static void bind_step(hbg_runtime *rt, hbg_workload *w, uint32_t step,
                      hbg_bind_stats *st) {
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  ASSERT_OK(hbg_workload_submit(w, b, step));
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  ASSERT_OK(hbg_bind_stats_get(b, st));
  hbg_bind_end(b);
  ASSERT_OK(hbg_workload_verify(w, step, NULL));
}

/* Every call as an ordinary task, chained, in one bind. */
static void run_list(hbg_runtime *rt, const hbg_workload_node *v,
                     uint32_t n) {
  hbg_bind *b;
  ASSERT_OK(hbg_bind_begin(rt, &b));
  hbg_task_id prev = HBG_TASK_NONE;
  for (uint32_t i = 0; i < n; i++) {
    hbg_tensor args[HBG_WORKLOAD_NODE_MAX_TENSORS];
    hbg_scalar sc[HBG_WORKLOAD_NODE_MAX_SCALARS];
    ASSERT_ULE(v[i].n_tensors, HBG_WORKLOAD_NODE_MAX_TENSORS);
    ASSERT_ULE(v[i].n_scalars, HBG_WORKLOAD_NODE_MAX_SCALARS);
    memcpy(args, v[i].tensors, v[i].n_tensors * sizeof args[0]);
    for (uint32_t s = 0; s < v[i].n_scalars; s++)
      sc[s] = hbg_scalar_static(v[i].scalars[s]);
    hbg_task t = {.kernel = v[i].kernel,
                  .n_args = v[i].n_tensors,
                  .args = args,
                  .n_scalars = v[i].n_scalars,
                  .scalars = sc,
                  .n_deps = i ? 1 : 0,
                  .deps = &prev};
    int rc = hbg_submit_task(b, &t, &prev);
    if (rc)
      T_FAIL("call %u (kernel %u, task %u): %s: %s", i, v[i].kernel,
             v[i].task, hbg_err_name(rc), hbg_last_error());
  }
  ASSERT_OK(hbg_bind_launch(b));
  ASSERT_OK(hbg_bind_wait(b));
  hbg_bind_end(b);
}

/* Every graph-internal tensor lies in [heap, heap + node_heap_bytes), at an
 * offset aligned for its dtype. */
static void check_heap(const hbg_workload_node *v, uint32_t n, uint64_t heap,
                       uint64_t heap_bytes, uint32_t *in_heap) {
  *in_heap = 0;
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < v[i].n_tensors; k++) {
      const hbg_tensor *t = &v[i].tensors[k];
      if (t->addr != heap)
        continue;
      uint64_t ext = hbg_tensor_extent(t);
      ASSERT(ext > 0);
      ASSERT_ULE(t->offset + ext, heap_bytes);
      ASSERT_UEQ(t->offset % hbg_dtype_size(t->dtype), 0);
      (*in_heap)++;
    }
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* The list against the runtime's own record of the step: one bind of it
 * (st) and the Definitions it recorded. Tasks are numbered as the bind
 * numbers its window entries; the first tasks_before and the last
 * tasks_after are one call each; every other task is a graph submission
 * with the node count of its Definition. When every Definition is
 * submitted once per layer (uses_per_layer), the graph tasks' node counts
 * are exactly those of the Definitions, `layers` times over. */
static void check_shape(hbg_runtime *rt, const hbg_workload_info *info,
                        const hbg_bind_stats *st, const hbg_workload_node *v,
                        uint32_t n, int once_per_layer) {
  uint32_t *per_task = calloc(st->n_tasks, sizeof *per_task);
  ASSERT(per_task);
  for (uint32_t i = 0; i < n; i++) {
    ASSERT_ULE(v[i].task, st->n_tasks - 1);
    if (i)
      ASSERT(v[i].task == v[i - 1].task || v[i].task == v[i - 1].task + 1);
    per_task[v[i].task]++;
  }
  ASSERT_EQ(v[0].task, 0);
  ASSERT_EQ(v[n - 1].task, st->n_tasks - 1);
  ASSERT_EQ(st->n_graphs, st->n_tasks - info->tasks_before - info->tasks_after);
  for (uint32_t t = 0; t < info->tasks_before; t++)
    ASSERT_EQ(per_task[t], 1);
  for (uint32_t t = st->n_tasks - info->tasks_after; t < st->n_tasks; t++)
    ASSERT_EQ(per_task[t], 1);

  uint32_t def_nodes[32], n_def = 0;
  uint64_t heap_max = 0;
  for (uint32_t i = 0; i < rt->graphs.cap; i++) {
    const hbg__graph *g = hbg__map_at(&rt->graphs, i);
    if (!g)
      continue;
    ASSERT_LT(n_def, 32);
    def_nodes[n_def++] = g->def->n_nodes;
    heap_max = HBG__MAX(heap_max, g->def->heap_size);
  }
  ASSERT_EQ(n_def, info->n_defs);
  /* the heap the device gives the largest graph, to the byte */
  ASSERT_UEQ(info->node_heap_bytes, heap_max);

  uint32_t *gc = per_task + info->tasks_before;
  for (uint32_t g = 0; g < st->n_graphs; g++) {
    int known = 0;
    for (uint32_t d = 0; d < n_def; d++)
      known |= gc[g] == def_nodes[d];
    ASSERT(known);
  }
  if (once_per_layer) {
    ASSERT_EQ(st->n_graphs, n_def * info->layers);
    uint32_t *want = calloc(st->n_graphs, sizeof *want);
    ASSERT(want);
    uint64_t sum = 0;
    for (uint32_t l = 0; l < info->layers; l++)
      for (uint32_t d = 0; d < n_def; d++) {
        want[l * n_def + d] = def_nodes[d];
        sum += def_nodes[d];
      }
    ASSERT_UEQ(n, info->tasks_before + info->tasks_after + sum);
    qsort(want, st->n_graphs, sizeof *want, cmp_u32);
    qsort(gc, st->n_graphs, sizeof *gc, cmp_u32);
    ASSERT(memcmp(want, gc, st->n_graphs * sizeof *gc) == 0);
    free(want);
  }
  free(per_task);
}

static void t_is_the_step(const char *name, uint32_t layers,
                          int once_per_layer, uint32_t s1, uint32_t s2) {
  hbg_runtime *rt = runtime();
  hbg_workload *w = workload(rt, name, layers);
  hbg_workload_info info;
  ASSERT_OK(hbg_workload_get_info(w, &info));
  ASSERT(info.node_heap_bytes > 0);
  ASSERT_UEQ(info.node_heap_bytes % 64, 0);

  /* the real bind records the Definitions and numbers the window */
  hbg_bind_stats st;
  bind_step(rt, w, 0, &st);

  uint64_t heap;
  ASSERT_OK(hbg_buffer_alloc(rt, info.node_heap_bytes, &heap));
  ASSERT_UEQ(heap % 64, 0);
  uint32_t n;
  hbg_workload_node *v = list(w, s1, heap, &n);
  check_shape(rt, &info, &st, v, n, once_per_layer);
  uint32_t in_heap;
  check_heap(v, n, heap, info.node_heap_bytes, &in_heap);
  ASSERT(in_heap > 0);
  /* listing writes no device memory: step 0's outputs still verify */
  ASSERT_OK(hbg_workload_verify(w, 0, NULL));

  run_list(rt, v, n);
  double err = -1.0;
  int rc = hbg_workload_verify(w, s1, &err);
  if (rc)
    T_FAIL("%s step %u from its calls: %s, max_abs_err %g", name, s1,
           hbg_err_name(rc), err);
  ASSERT(err == 0.0);

  /* another step: its own scalars and cache rows; the same shape */
  uint32_t n2;
  hbg_workload_node *v2 = list(w, s2, heap, &n2);
  ASSERT_EQ(n2, n);
  int differs = 0;
  for (uint32_t i = 0; i < n; i++) {
    ASSERT_EQ(v2[i].kernel, v[i].kernel);
    ASSERT_EQ(v2[i].task, v[i].task);
    differs |= memcmp(&v2[i], &v[i], sizeof v[i]) != 0;
  }
  ASSERT(differs);
  run_list(rt, v2, n2);
  rc = hbg_workload_verify(w, s2, &err);
  if (rc)
    T_FAIL("%s step %u from its calls: %s, max_abs_err %g", name, s2,
           hbg_err_name(rc), err);
  /* and step s1's calls do not make step s2 */
  run_list(rt, v, n);
  ASSERT_ERR(hbg_workload_verify(w, s2, NULL), HBG_E_VERIFY);

  printf("%-10s layers %u: %u calls, %u graph-internal tensor uses, heap "
         "%llu B\n",
         name, layers, n, in_heap, (unsigned long long)info.node_heap_bytes);
  free(v);
  free(v2);
  ASSERT_OK(hbg_buffer_free(rt, heap));
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

static void t_api(void) {
  hbg_runtime *rt = runtime();
  hbg_workload *w = workload(rt, "dsv4", 4);
  const uint64_t heap = 1u << 20;
  uint32_t n = 0, m = 7;
  ASSERT_OK(hbg_workload_nodes(w, 3, heap, NULL, 0, &n));
  ASSERT(n > 2);
  /* out NULL: cap is ignored */
  ASSERT_OK(hbg_workload_nodes(w, 3, heap, NULL, 1, &m));
  ASSERT_EQ(m, n);

  hbg_workload_node *v = malloc((n + 1) * sizeof *v);
  ASSERT(v);
  memset(v, 0xab, (n + 1) * sizeof *v);
  hbg_workload_node poison;
  memcpy(&poison, v, sizeof poison);
  /* too small: the number needed, nothing written */
  m = 0;
  ASSERT_ERR(hbg_workload_nodes(w, 3, heap, v, n - 1, &m), HBG_E_LIMIT);
  ASSERT_EQ(m, n);
  for (uint32_t i = 0; i < n + 1; i++)
    ASSERT(memcmp(&v[i], &poison, sizeof poison) == 0);
  m = 0;
  ASSERT_ERR(hbg_workload_nodes(w, 3, heap, v, 0, &m), HBG_E_LIMIT);
  ASSERT_EQ(m, n);
  /* exactly enough, and more than enough: n calls, nothing past them */
  ASSERT_OK(hbg_workload_nodes(w, 3, heap, v, n, &m));
  ASSERT_EQ(m, n);
  ASSERT_OK(hbg_workload_nodes(w, 3, heap, v, n + 1, &m));
  ASSERT_EQ(m, n);
  ASSERT(memcmp(&v[n], &poison, sizeof poison) == 0);
  /* the heap argument places the graph-internal tensors */
  hbg_workload_node *u = malloc(n * sizeof *u);
  ASSERT(u);
  ASSERT_OK(hbg_workload_nodes(w, 3, heap * 2, u, n, &m));
  uint32_t moved = 0;
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t k = 0; k < v[i].n_tensors; k++) {
      ASSERT(v[i].tensors[k].addr != heap * 2);
      if (v[i].tensors[k].addr != heap) {
        ASSERT(memcmp(&u[i].tensors[k], &v[i].tensors[k],
                      sizeof u[i].tensors[k]) == 0);
        continue;
      }
      ASSERT_UEQ(u[i].tensors[k].addr, heap * 2);
      ASSERT_UEQ(u[i].tensors[k].offset, v[i].tensors[k].offset);
      moved++;
    }
  ASSERT(moved > 0);

  ASSERT_ERR(hbg_workload_nodes(NULL, 3, heap, v, n, &m), HBG_E_INVAL);
  ASSERT_ERR(hbg_workload_nodes(w, 3, heap, v, n, NULL), HBG_E_INVAL);
  ASSERT_ERR(hbg_workload_nodes(w, 3, 0, v, n, &m), HBG_E_INVAL);
  ASSERT_ERR(hbg_workload_nodes(w, 3, heap + 32, v, n, &m), HBG_E_INVAL);
  ASSERT_ERR(hbg_workload_nodes(w, 3, heap + 1, NULL, 0, &m), HBG_E_INVAL);
  free(u);
  free(v);
  hbg_workload_destroy(w);
  hbg_runtime_destroy(rt);
}

int main(void) {
  t_api();
  t_is_the_step("qwen3-14b", 3, 1, 5, 70);
  t_is_the_step("dsv4", 3, 1, 4, 21);
  /* MoE layers: routed experts picked per step */
  t_is_the_step("dsv4", 6, 0, 2, 9);
  return 0;
}
