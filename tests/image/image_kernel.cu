/* Compiled (not run) by nvcc when CMake finds it (test image_header_nvcc):
 * the validators and the node iterator are __host__ __device__ and can be
 * called from a __global__ function. */
#include <hbg/hbg_image.h>

__global__ void validate_window(const void *win, uint64_t len, int *status) {
  hbg_img_win_view wv;
  int rc = hbg_img_win_validate(win, len, &wv);
  status[0] = rc;
}

__global__ void expand_node(const void *def, uint64_t def_len, const void *sub,
                            uint64_t sub_len, uint64_t heap, uint64_t *addrs,
                            int *status) {
  hbg_img_def_view dv;
  hbg_img_sub_view sv;
  hbg_img_graph g;
  int rc = hbg_img_def_validate(def, def_len, NULL, NULL, &dv);
  if (rc == 0)
    rc = hbg_img_sub_validate(sub, sub_len, NULL, NULL, &sv);
  if (rc == 0)
    rc = hbg_img_sub_check_def(&sv, &dv);
  if (rc == 0)
    rc = hbg_img_graph_init(&g, &dv, &sv, heap);
  hbg_img_node n;
  if (rc == 0)
    rc = hbg_img_graph_node(&g, threadIdx.x % g.hdr.n_nodes, &n);
  hbg_img_arg a;
  if (rc == 0 && n.n_tensors)
    rc = hbg_img_graph_tensor(&g, threadIdx.x % g.hdr.n_nodes, 0, &a);
  if (rc == 0 && n.n_tensors)
    addrs[threadIdx.x] = a.addr;
  status[threadIdx.x] = rc;
}
