/* Compiled on its own as C11 (-pedantic, -ffreestanding) and as C++17 by
 * CTest (tests image_header_c11, image_header_cxx17): hbg_image.h must need
 * nothing but itself. Every entry point is called so that each one is
 * type-checked in both languages. */
#include <hbg/hbg_image.h>

HBG_IMAGE_STATIC_ASSERT(HBG_IMG_MAX_DIMS == 4, "dims");
HBG_IMAGE_STATIC_ASSERT(offsetof(hbg_win_task, sub_addr) == 40, "layout");

static uint64_t zero_hash(const void *img, uint64_t len, uint64_t hash_off,
                          void *user) {
  (void)img;
  (void)len;
  (void)hash_off;
  (void)user;
  return 0;
}

int image_alone(const void *def, uint64_t def_len, const void *sub,
                uint64_t sub_len, const void *win, uint64_t win_len);

int image_alone(const void *def, uint64_t def_len, const void *sub,
                uint64_t sub_len, const void *win, uint64_t win_len) {
  hbg_img_def_view dv;
  hbg_img_sub_view sv;
  hbg_img_win_view wv;
  int rc = hbg_img_def_validate(def, def_len, zero_hash, NULL, &dv);
  if (rc)
    return rc;
  rc = hbg_img_sub_validate(sub, sub_len, NULL, NULL, &sv);
  if (rc)
    return rc;
  rc = hbg_img_sub_check_def(&sv, &dv);
  if (rc)
    return rc;
  rc = hbg_img_win_validate(win, win_len, &wv);
  if (rc)
    return rc;
  const hbg_win_task *t = hbg_img_win_task(&wv, 0);
  if (!t)
    return HBG_IMG_E_INVAL;
  uint64_t def_size = 0;
  uint64_t def_addr = hbg_img_graph_def_addr(t, sv.hdr, &def_size);
  uint64_t sum = def_addr + def_size + hbg_img_win_task_tensors(t)->addr +
                 hbg_img_win_task_scalars(t)[0] + hbg_img_win_task_deps(t)[0];
  hbg_img_graph g;
  rc = hbg_img_graph_init(&g, &dv, &sv, t->heap_addr);
  if (rc)
    return rc;
  for (uint32_t i = 0; i < g.hdr.n_nodes; i++) {
    hbg_img_node n;
    rc = hbg_img_graph_node(&g, i, &n);
    if (rc)
      return rc;
    for (uint32_t k = 0; k < n.n_tensors; k++) {
      hbg_img_arg a;
      rc = hbg_img_graph_tensor(&g, i, k, &a);
      if (rc)
        return rc;
      sum += a.addr;
    }
    for (uint32_t k = 0; k < n.n_scalars; k++) {
      uint64_t v;
      rc = hbg_img_graph_scalar(&g, i, k, &v);
      if (rc)
        return rc;
      sum += v;
    }
  }
  uint32_t bad = 0;
  rc = hbg_img_sub_check_align(&sv, &dv, &bad);
  sum += hbg_img_kernel_is_user(HBG_IMG_KERNEL_USER_MIN) +
         (uint64_t)hbg_img_kernel_valid(HBG_IMG_KERNEL_BUILTIN_COUNT);
  return rc ? rc : (int)(sum & 1);
}
