/* Every open sim device has its own address tag (the top bits of its
 * device addresses), so an address of one device is never resolved as
 * memory of another, however many devices were opened and closed before:
 * a freed tag is reused only once its device is closed, and with all 255
 * tags in use one more open is HBG_E_LIMIT, named in hbg_last_error(). */
#include <hbg/hbg_device.h>

#include <string.h>

#include "test.h"

#define OPTS "mem=1M,workers=1,spin=0"
#define TAGS 255

int main(void) {
  hbg_device *a = NULL;
  ASSERT_OK(hbg_device_open("sim", OPTS, &a));
  hbg_devptr pa = 0;
  ASSERT_OK(hbg_dev_mem_alloc(a, 4096, &pa));
  static uint8_t pat[4096], got[4096];
  memset(pat, 0x5a, sizeof pat);
  ASSERT_OK(hbg_dev_copy_h2d(a, pa, pat, sizeof pat));

  /* More opens than there are tags, one at a time: none takes a's. */
  for (int i = 0; i < 2 * TAGS + 10; i++) {
    hbg_device *b = NULL;
    ASSERT_OK(hbg_device_open("sim", OPTS, &b));
    hbg_devptr pb = 0;
    ASSERT_OK(hbg_dev_mem_alloc(b, 4096, &pb));
    ASSERT((pb >> 48) != (pa >> 48));
    ASSERT_ERR(hbg_dev_copy_d2h(b, got, pa, sizeof got), HBG_E_RANGE);
    ASSERT_OK(hbg_dev_mem_free(b, pb));
    hbg_device_close(b);
  }
  ASSERT_OK(hbg_dev_copy_d2h(a, got, pa, sizeof got));
  ASSERT(memcmp(got, pat, sizeof got) == 0);

  /* All tags in use: the next open is refused, and works again once one
   * device closes. */
  static hbg_device *d[TAGS];
  for (int i = 0; i < TAGS - 1; i++)
    ASSERT_OK(hbg_device_open("sim", OPTS, &d[i]));
  hbg_device *x = NULL;
  ASSERT_ERR(hbg_device_open("sim", OPTS, &x), HBG_E_LIMIT);
  ASSERT(x == NULL);
  ASSERT(strstr(hbg_device_open_error(), "255 sim devices are open"));
  hbg_device_close(d[7]);
  ASSERT_OK(hbg_device_open("sim", OPTS, &d[7]));
  for (int i = 0; i < TAGS - 1; i++)
    hbg_device_close(d[i]);
  ASSERT_OK(hbg_dev_mem_free(a, pa));
  hbg_device_close(a);
  printf("sim tags: unique while open\n");
  return 0;
}
