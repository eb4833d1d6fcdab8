/*
 * The device module: one translation unit, every device source included
 * once. nvcc compiles this file (-x cu) into the fatbin libhbg embeds; the
 * stand-in driver library compiles it as C with HBG_DC_HOST.
 */
#include "check.c"
#include "exec.c"
#include "node.c"
