/* Placeholder: replaced by the exec layer. */
#include "exec/exec.h"
int hbg__exec_create(hbg__sim *s, uint32_t w, hbg__exec **out) { (void)s; (void)w; *out = NULL; return 0; }
void hbg__exec_destroy(hbg__exec *e) { (void)e; }
int hbg__exec_run(hbg__exec *e, const hbg_dev_launch_desc *l, hbg_dev_status *st) { (void)e; (void)l; st->error = HBG_E_UNSUPPORTED; return HBG_E_UNSUPPORTED; }
void hbg__exec_invalidate(hbg__exec *e, hbg_devptr a, uint64_t l) { (void)e; (void)a; (void)l; }
