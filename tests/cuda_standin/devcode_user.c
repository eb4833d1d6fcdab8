/*
 * The device module built as the stand-in's host code a second time, with
 * HBG_DC_USER: the executor a link with user kernels produces (its calls
 * to hbg_dcu_info / hbg_dcu_call resolve in cuda_mock.c, per linked
 * module). Entry points renamed hbgmock_u_* so that both builds live in
 * one library. Test code, like cuda_mock.c.
 */
#define HBG_DC_USER 1
#define hbg_dc_check_window hbgmock_u_hbg_dc_check_window
#define hbg_dc_exec hbgmock_u_hbg_dc_exec
#define hbg_dc_node hbgmock_u_hbg_dc_node
#include "device/cuda/devcode/module.c"
