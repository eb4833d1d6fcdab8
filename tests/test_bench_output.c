/* hbg bench writers (tools/bench_out.c): JSON parses back with every key,
 * the SVG is well-formed XML, the trace is Chrome trace-event JSON. */
#include <ctype.h>
#include <math.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "../tools/bench_out.c"
#include "../tools/bench_stats.c"
#include "test.h"

#define ROUNDS 7u
#define NPOL 3u

static bench_rec recs[NPOL * ROUNDS];
static bench_policy_res pol[NPOL];

/* A synthetic run: policy a, round r has control_plane (a+1) * (r+1) * 1000
 * ns, split 10% / 70% / 20%; the first policy never uploads graphs. */
static void make_result(bench_result *r) {
  memset(r, 0, sizeof *r);
  memset(pol, 0, sizeof pol);
  pol[0].name = "deferred";
  pol[1].name = "pinned-eager";
  pol[2].name = "coalesced<&>";
  for (uint32_t a = 0; a < NPOL; a++)
    for (uint32_t i = 0; i < ROUNDS; i++) {
      bench_rec *x = &recs[a * ROUNDS + i];
      memset(x, 0, sizeof *x);
      uint64_t cp = (uint64_t)(a + 1) * (i + 1) * 1000;
      x->arm = a;
      x->round = i;
      x->seq = 5 + i;
      x->ns[BENCH_PH_HOST_ORCH] = cp / 10;
      x->ns[BENCH_PH_GRAPH_UP] = a ? cp * 7 / 10 : 0;
      x->ns[BENCH_PH_WINDOW_UP] = cp - x->ns[BENCH_PH_HOST_ORCH] -
                                  x->ns[BENCH_PH_GRAPH_UP];
      x->ns[BENCH_PH_CONTROL] = cp;
      x->ns[BENCH_PH_EXEC] = 50000 + i;
      x->ns[BENCH_PH_DEVICE] = 40000 + i;
      x->graph_bytes = 5310080 / (a + 1);
      x->graph_copies = 40;
      x->window_bytes = 4096;
      x->window_copies = 1;
      x->h2d_bytes = x->graph_bytes + x->window_bytes;
      x->h2d_copies = 41;
      x->leftover = a == 1 && i == 3 ? 7 : 0;
      x->arena_high_water = 1000 + i;
      x->verified = a == 2 && i == 6 ? 0 : i % 2 ? -1 : 1;
      x->max_abs_err = x->verified == 0 ? 0.5 : 0.0;
      /* policy 2 has a bind without a fault count */
      x->minflt = a == 2 && i == 4 ? UINT64_MAX : (uint64_t)a * 100 + i;
      /* the executor's split: every bind of policy 0, the even binds of
       * policy 1, none of policy 2 (a verifier) */
      x->defs_validated = a + (i == 0);
      x->split = a == 0 || (a == 1 && i % 2 == 0);
      x->dev_setup_ns = x->split ? 3000 + 1000 * i : 0;
      x->setup_nodes = x->split ? 40 + i : 0;
      /* the executor's counters: policy 0's odd binds only */
      x->counts = a == 0 && i % 2;
      x->items = x->counts ? 1000 + 100 * i : 0;
      x->dispatch_ops = x->counts ? 4 * x->items : 0;
      x->kernel_phases = x->counts ? 2 * x->items : 0;
      x->body_ns = x->counts ? 20000 + 1000 * i : 0;
      x->tail_ns = x->counts ? 500 : 0;
    }
  r->workload = "qwen3-14b";
  r->device = "sim";
  r->device_options = "workers=2,profile=ascend-a2";
  r->device_profile = "ascend-a2";
  r->host_alloc = "retain";
  r->sim_spin_us = 0;
  r->version = "0.1.0";
  r->layers = 40;
  r->rounds = ROUNDS;
  r->warmup = 5;
  r->interleave = 5;
  r->verify_every = 1;
  r->trim = 0.2;
  r->n_policies = NPOL;
  r->pol = pol;
  r->n_recs = NPOL * ROUNDS;
  r->recs = recs;
  bench_result_machine(r);
  ASSERT_EQ(bench_result_compute(r), 0);
}

typedef int (*writer)(const bench_result *, FILE *);

static char *render(writer fn, const bench_result *r) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ASSERT(f);
  ASSERT_EQ(fn(r, f), 0);
  ASSERT_EQ(fclose(f), 0);
  ASSERT(buf && len > 0);
  return buf;
}

static void t_compute(void) {
  bench_result r;
  make_result(&r);
  /* sorted control_plane of policy 1: 2000, 4000, ..., 14000 */
  ASSERT(fabs(pol[1].ph[BENCH_PH_CONTROL].median - 8000.0) < 1e-9);
  ASSERT(fabs(pol[1].ph[BENCH_PH_CONTROL].min - 2000.0) < 1e-9);
  /* n = 7, trim 0.2: drop one at each end: mean(4000..12000) */
  ASSERT(fabs(pol[1].ph[BENCH_PH_CONTROL].tmean - 8000.0) < 1e-9);
  ASSERT(fabs(pol[2].ratio[BENCH_PH_CONTROL] - 3.0) < 1e-9);
  ASSERT(isnan(pol[1].ratio[BENCH_PH_GRAPH_UP])); /* baseline median 0 */
  ASSERT(fabs(pol[1].leftover - 1.0) < 1e-9);     /* 7 over 7 binds */
  ASSERT(fabs(pol[1].minflt - 103.0) < 1e-9);     /* mean of 100..106 */
  ASSERT(isnan(pol[2].minflt));                   /* one bind without */
  ASSERT(fabs(pol[0].h2d_bytes - (5310080.0 + 4096.0)) < 1e-9);
  ASSERT_UEQ(pol[0].arena_high_water, 1006);
  ASSERT_UEQ(pol[0].binds, ROUNDS);
  ASSERT_UEQ(pol[0].checked, 4);
  ASSERT_EQ(pol[0].verified, 1);
  ASSERT_UEQ(pol[2].mismatched, 1);
  ASSERT_EQ(pol[2].verified, 0);
  /* the executor's split, over the binds that reported it */
  ASSERT_UEQ(pol[0].split_binds, ROUNDS);
  ASSERT(fabs(pol[0].dev_setup.median - 6000.0) < 1e-9);
  ASSERT(fabs(pol[0].setup_nodes - 43.0) < 1e-9);
  ASSERT(fabs(pol[0].defs_validated - 1.0 / ROUNDS) < 1e-9);
  ASSERT_UEQ(pol[1].split_binds, 4); /* i = 0, 2, 4, 6 */
  ASSERT(fabs(pol[1].dev_setup.median - 6000.0) < 1e-9);
  ASSERT(fabs(pol[1].setup_nodes - 43.0) < 1e-9);
  ASSERT_UEQ(pol[2].split_binds, 0);
  ASSERT(isnan(pol[2].dev_setup.median) && isnan(pol[2].setup_nodes));
  ASSERT(fabs(pol[2].defs_validated - (2.0 + 1.0 / ROUNDS)) < 1e-9);
  /* the counters, over the binds that reported them (i = 1, 3, 5) */
  ASSERT_UEQ(pol[0].count_binds, 3);
  ASSERT(fabs(pol[0].items_per_bind - 1300.0) < 1e-9);
  ASSERT(fabs(pol[0].ops_per_item - 4.0) < 1e-9);
  ASSERT(fabs(pol[0].phases_per_item - 2.0) < 1e-9);
  ASSERT(fabs(pol[0].body_ns - 23000.0) < 1e-9);
  ASSERT(fabs(pol[0].tail_ns - 500.0) < 1e-9);
  ASSERT(isnan(pol[1].items_per_bind) && isnan(pol[1].body_ns));

  bench_result bad = r;
  bad.n_recs = ROUNDS; /* policies 1 and 2 have no binds */
  ASSERT_EQ(bench_result_compute(&bad), -1);
}

static const cJSON *get(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  if (!v)
    T_FAIL("JSON key \"%s\" missing", k);
  return v;
}

static double num(const cJSON *o, const char *k) {
  const cJSON *v = get(o, k);
  if (!cJSON_IsNumber(v))
    T_FAIL("JSON key \"%s\" is not a number", k);
  return v->valuedouble;
}

static void t_json(void) {
  bench_result r;
  make_result(&r);
  char *s = render(bench_write_json, &r);
  cJSON *root = cJSON_Parse(s);
  ASSERT(root && cJSON_IsObject(root));
  ASSERT_STREQ(cJSON_GetStringValue(get(root, "workload")), "qwen3-14b");
  ASSERT_STREQ(cJSON_GetStringValue(get(root, "device")), "sim");
  ASSERT_EQ(num(root, "layers"), 40);
  ASSERT_EQ(num(root, "rounds"), ROUNDS);
  ASSERT_EQ(num(root, "warmup"), 5);
  ASSERT_EQ(num(root, "interleave"), 5);
  ASSERT(fabs(num(root, "trim") - 0.2) < 1e-12);
  /* every setting that moves a ratio */
  ASSERT_STREQ(cJSON_GetStringValue(get(root, "host_alloc")), "retain");
  ASSERT_STREQ(cJSON_GetStringValue(get(root, "device_profile")), "ascend-a2");
  ASSERT_STREQ(cJSON_GetStringValue(get(root, "device_options")),
               "workers=2,profile=ascend-a2");
  ASSERT_EQ(num(root, "sim_spin_us"), 0);
  ASSERT(cJSON_IsNull(get(root, "glibc_tunables")));
  const cJSON *m = get(root, "machine");
  ASSERT(cJSON_IsObject(m));
  ASSERT(cJSON_IsString(get(m, "hostname")));
  ASSERT_GE(num(m, "nproc"), 1);
  const cJSON *ps = get(root, "policies");
  ASSERT(cJSON_IsArray(ps));
  ASSERT_EQ(cJSON_GetArraySize(ps), NPOL);
  static const char *const phases[] = {"control_plane_us", "host_orch_us",
                                       "graph_upload_us", "window_upload_us",
                                       "exec_us", "device_us"};
  static const char *const per_bind[] = {
      "graph_bytes_per_bind", "def_bytes_per_bind", "h2d_bytes_per_bind",
      "h2d_copies_per_bind", "leftover_per_bind", "fallback_per_bind"};
  for (uint32_t a = 0; a < NPOL; a++) {
    const cJSON *p = cJSON_GetArrayItem(ps, (int)a);
    ASSERT(cJSON_IsObject(p));
    ASSERT_STREQ(cJSON_GetStringValue(get(p, "name")), pol[a].name);
    for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++) {
      const cJSON *ph = get(p, phases[i]);
      ASSERT(cJSON_IsObject(ph));
      num(ph, "median");
      num(ph, "min");
      num(ph, "trimmed_mean");
    }
    for (size_t i = 0; i < sizeof per_bind / sizeof per_bind[0]; i++)
      num(p, per_bind[i]);
    if (a == 2)
      ASSERT(cJSON_IsNull(get(p, "minor_faults_per_bind")));
    else
      ASSERT(fabs(num(p, "minor_faults_per_bind") - (a * 100.0 + 3)) < 1e-9);
    ASSERT(cJSON_IsBool(get(p, "verified")));
    ASSERT_EQ(cJSON_IsTrue(get(p, "verified")), a != 2);
    const cJSON *ra = get(p, "ratio_vs_first");
    ASSERT(cJSON_IsObject(ra));
    ASSERT(fabs(num(ra, "control_plane") - (double)(a + 1)) < 1e-9);
    /* the baseline's graph_upload median is 0: no ratio */
    ASSERT(cJSON_IsNull(get(ra, "graph_upload")));
  }
  /* values in microseconds */
  const cJSON *p1 = cJSON_GetArrayItem(ps, 1);
  ASSERT(fabs(num(get(p1, "control_plane_us"), "median") - 8.0) < 1e-9);
  ASSERT(fabs(num(get(p1, "device_us"), "median") - 40.003) < 1e-9);
  /* no peer arms: an empty list */
  ASSERT(cJSON_IsArray(get(root, "arms")));
  ASSERT_EQ(cJSON_GetArraySize(get(root, "arms")), 0);
  ASSERT(fabs(num(p1, "h2d_bytes_per_bind") - (5310080.0 / 2 + 4096)) < 1e-6);
  /* the executor's account: null for the policy whose device gave none */
  ASSERT(fabs(num(get(p1, "device_setup_us"), "median") - 6.0) < 1e-9);
  ASSERT(fabs(num(p1, "exec_setup_nodes_per_bind") - 43.0) < 1e-9);
  ASSERT(fabs(num(p1, "exec_defs_validated_per_bind") - (1 + 1.0 / ROUNDS)) <
         1e-9);
  const cJSON *p2 = cJSON_GetArrayItem(ps, 2);
  ASSERT(cJSON_IsNull(get(get(p2, "device_setup_us"), "median")));
  ASSERT(cJSON_IsNull(get(p2, "exec_setup_nodes_per_bind")));
  num(p2, "exec_defs_validated_per_bind");
  const cJSON *p0 = cJSON_GetArrayItem(ps, 0);
  ASSERT(fabs(num(p0, "exec_items_per_bind") - 1300.0) < 1e-9);
  ASSERT(fabs(num(p0, "exec_dispatch_ops_per_item") - 4.0) < 1e-9);
  ASSERT(fabs(num(p0, "exec_phases_per_item") - 2.0) < 1e-9);
  ASSERT(fabs(num(p0, "device_body_us") - 23.0) < 1e-9);
  ASSERT(fabs(num(p0, "device_tail_us") - 0.5) < 1e-9);
  ASSERT(cJSON_IsNull(get(p1, "exec_items_per_bind")));
  ASSERT(cJSON_IsNull(get(p1, "device_body_us")));
  cJSON_Delete(root);
  free(s);

  /* not the sim, no profile, tunables set */
  r.device = "cuda";
  r.device_options = NULL;
  r.device_profile = "none";
  r.sim_spin_us = -1;
  r.host_alloc = "trim";
  r.glibc_tunables = "glibc.malloc.trim_threshold=1";
  s = render(bench_write_json, &r);
  root = cJSON_Parse(s);
  ASSERT(root);
  ASSERT_STREQ(cJSON_GetStringValue(get(root, "host_alloc")), "trim");
  ASSERT_STREQ(cJSON_GetStringValue(get(root, "device_profile")), "none");
  ASSERT(cJSON_IsNull(get(root, "sim_spin_us")));
  ASSERT_STREQ(cJSON_GetStringValue(get(root, "glibc_tunables")),
               "glibc.malloc.trim_threshold=1");
  cJSON_Delete(root);
  free(s);
}

static void t_csv(void) {
  bench_result r;
  make_result(&r);
  char *s = render(bench_write_csv, &r);
  size_t lines = 0, header_commas = 0;
  for (const char *p = s; *p; p++)
    if (*p == '\n')
      lines++;
  for (const char *p = s; *p && *p != '\n'; p++)
    header_commas += *p == ',';
  ASSERT_UEQ(lines, 1 + NPOL * ROUNDS);
  ASSERT(!strncmp(s, "policy,round,", 13));
  ASSERT(strstr(s, "control_plane_ns"));
  ASSERT(strstr(s, "h2d_copies"));
  ASSERT(strstr(s, "\npinned-eager,3,8,"));
  ASSERT(strstr(s, ",exec_ns,device_ns,"));
  ASSERT(strstr(s, ",minor_faults,host_alloc,device_profile,sim_spin_us,kind,"
                   "launches,updates,capture_ns,instantiate_ns,deps,record,"
                   "sim_clock\n"));
  /* every row ends with the bind's faults and the run's settings, and a
   * policy's has no peer counts */
  ASSERT(strstr(s, ",103,retain,ascend-a2,0,policy,,,,,,,\n"));
  ASSERT(strstr(s, ",,retain,ascend-a2,0,policy,,,,,,,\n")); /* no count: empty */
  ASSERT(strstr(s, "\npinned-eager,3,8,8000,800,5600,1600,50003,40003,"));
  for (const char *p = strchr(s, '\n') + 1; *p; p = strchr(p, '\n') + 1) {
    size_t commas = 0;
    for (const char *q = p; *q != '\n'; q++)
      commas += *q == ',';
    ASSERT_UEQ(commas, header_commas);
  }
  free(s);
}

static void t_table(void) {
  bench_result r;
  make_result(&r);
  char *s = render(bench_print_table, &r);
  ASSERT(strstr(s, "deferred"));
  ASSERT(strstr(s, "control_plane"));
  ASSERT(strstr(s, "window_upload"));
  ASSERT(strstr(s, "ratio of medians vs deferred"));
  ASSERT(strstr(s, "graph_upload n/a"));
  ASSERT(strstr(s, "control_plane 3.000x"));
  ASSERT(strstr(s, "host allocator retain (freed heap pages kept"));
  ASSERT(strstr(s, "device profile ascend-a2"));
  ASSERT(strstr(s, "sim copy polling spin=0"));
  ASSERT(strstr(s, "faults"));
  ASSERT(strstr(s, "  103.0  yes")); /* pinned-eager's mean faults */
  free(s);
  r.host_alloc = "trim";
  r.sim_spin_us = -1;
  s = render(bench_print_table, &r);
  ASSERT(strstr(s, "host allocator trim (glibc defaults"));
  ASSERT(!strstr(s, "spin="));
  free(s);
}

/* ---- a tiny XML well-formedness checker ---- */

static const char *xml_name(const char *p) {
  if (!(isalpha((unsigned char)*p) || *p == '_' || *p == ':'))
    return NULL;
  while (isalnum((unsigned char)*p) || strchr("_:.-", *p))
    p++;
  return p;
}

static const char *xml_ref(const char *p) {
  /* p at '&' */
  p++;
  if (*p == '#') {
    p++;
    int hex = *p == 'x';
    p += hex;
    const char *d = p;
    while (hex ? isxdigit((unsigned char)*p) : isdigit((unsigned char)*p))
      p++;
    return p > d && *p == ';' ? p + 1 : NULL;
  }
  const char *e = xml_name(p);
  if (!e || *e != ';')
    return NULL;
  size_t n = (size_t)(e - p);
  static const char *const known[] = {"amp", "lt", "gt", "quot", "apos"};
  for (size_t i = 0; i < 5; i++)
    if (strlen(known[i]) == n && !strncmp(p, known[i], n))
      return e + 1;
  return NULL;
}

/* @return NULL when well-formed, else a description. */
static const char *xml_check(const char *s) {
  const char *stack[64];
  size_t slen[64], depth = 0;
  int roots = 0;
  const char *p = s;
  while (*p) {
    if (*p != '<') {
      if (*p == '&') {
        if (!(p = xml_ref(p)))
          return "bad entity reference in text";
        continue;
      }
      if (!depth && !isspace((unsigned char)*p))
        return "text outside the root element";
      p++;
      continue;
    }
    if (!strncmp(p, "<?", 2)) {
      if (roots || depth || !(p = strstr(p, "?>")))
        return "bad processing instruction";
      p += 2;
    } else if (!strncmp(p, "<!--", 4)) {
      if (!(p = strstr(p + 4, "-->")))
        return "unterminated comment";
      p += 3;
    } else if (p[1] == '/') {
      const char *e = xml_name(p + 2);
      if (!e || !depth)
        return "bad end tag";
      size_t n = (size_t)(e - (p + 2));
      depth--;
      if (n != slen[depth] || strncmp(p + 2, stack[depth], n))
        return "mismatched end tag";
      while (isspace((unsigned char)*e))
        e++;
      if (*e != '>')
        return "bad end tag";
      p = e + 1;
    } else {
      const char *name = p + 1, *e = xml_name(name);
      if (!e)
        return "bad start tag";
      if (!depth && roots++)
        return "more than one root element";
      size_t n = (size_t)(e - name);
      p = e;
      for (;;) {
        int ws = 0;
        while (isspace((unsigned char)*p))
          p++, ws = 1;
        if (*p == '>' || (*p == '/' && p[1] == '>'))
          break;
        const char *ae = xml_name(p);
        if (!ws || !ae)
          return "bad attribute";
        p = ae;
        while (isspace((unsigned char)*p))
          p++;
        if (*p++ != '=')
          return "attribute without '='";
        while (isspace((unsigned char)*p))
          p++;
        char q = *p++;
        if (q != '"' && q != '\'')
          return "unquoted attribute value";
        while (*p && *p != q) {
          if (*p == '<')
            return "'<' in attribute value";
          if (*p == '&') {
            if (!(p = xml_ref(p)))
              return "bad entity reference in attribute";
          } else {
            p++;
          }
        }
        if (*p++ != q)
          return "unterminated attribute value";
      }
      if (*p == '/') {
        p += 2;
      } else {
        if (depth == 64)
          return "too deep";
        stack[depth] = name;
        slen[depth++] = n;
        p++;
      }
    }
  }
  if (depth)
    return "unclosed element";
  return roots == 1 ? NULL : "no root element";
}

static void t_xml_checker(void) {
  ASSERT(xml_check("<a><b x=\"1\"/>t&amp;</a>") == NULL);
  ASSERT(xml_check("<?xml version=\"1.0\"?>\n<a>&#181;</a>\n") == NULL);
  ASSERT(xml_check("<a><b></a></b>") != NULL);
  ASSERT(xml_check("<a x=1></a>") != NULL);
  ASSERT(xml_check("<a>&</a>") != NULL);
  ASSERT(xml_check("<a>x < y</a>") != NULL);
  ASSERT(xml_check("<a></a><b></b>") != NULL);
  ASSERT(xml_check("<a>") != NULL);
  ASSERT(xml_check("<a x=\"<\"></a>") != NULL);
}

static size_t count(const char *s, const char *what) {
  size_t n = 0;
  for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
    n++;
  return n;
}

/* xmllint --noout, then tests/svg_check.sh with min_share (the stacked
 * segments add up to each labelled total; every bar is at least that share
 * of the plot wide in some panel). @return 0 ok, 77 no xmllint, else the
 * failing exit status. */
static int svg_external(const char *svg, const char *min_share) {
  const char *src = getenv("HBG_TEST_SRC");
  if (access("/usr/bin/xmllint", X_OK) != 0 || !src)
    return 77;
  char path[] = "/tmp/hbg_bench_svg_XXXXXX";
  int fd = mkstemp(path);
  ASSERT(fd >= 0);
  FILE *f = fdopen(fd, "w");
  ASSERT(f);
  ASSERT(fputs(svg, f) >= 0);
  ASSERT_EQ(fclose(f), 0);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "/usr/bin/xmllint --noout %s", path);
  int rc = system(cmd);
  if (rc == 0) {
    snprintf(cmd, sizeof cmd, "%s/svg_check.sh %s %s", src, path, min_share);
    rc = system(cmd);
  }
  unlink(path);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void t_svg(void) {
  bench_result r;
  make_result(&r);
  char *s = render(bench_write_svg, &r);
  const char *err = xml_check(s);
  if (err)
    T_FAIL("SVG not well-formed: %s", err);
  ASSERT(strstr(s, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
  ASSERT(strstr(s, "version=\"1.1\""));
  ASSERT(strstr(s, "coalesced&lt;&amp;&gt;")); /* names are escaped */
  ASSERT(strstr(s, "host_orch"));
  ASSERT(strstr(s, "graph_upload"));
  ASSERT(strstr(s, "window_upload"));
  ASSERT(strstr(s, "\xC2\xB5s")); /* units */
  ASSERT(strstr(s, "<rect"));
  ASSERT(strstr(s, "</svg>"));
  ASSERT(strstr(s, "host allocator retain (freed heap pages kept"));
  ASSERT(strstr(s, "device profile ascend-a2"));
  ASSERT(strstr(s, "sim copy polling spin=0 (us)"));
  ASSERT(strstr(s, "device options: workers=2,profile=ascend-a2"));
  ASSERT(strstr(s, "need not equal the sum of the medians")); /* why not */
  /* bars 1 : 2 : 3, all on one scale: no zoomed panel */
  ASSERT_UEQ(count(s, "<g class=\"panel\">"), 1);
  ASSERT_UEQ(count(s, "<g class=\"bar\">"), NPOL);
  /* the stacked medians of policy 1: 0.8 + 5.6 + 1.6 us */
  ASSERT(strstr(s, "<tspan class=\"total\">8.00</tspan>"));
  int rc = svg_external(s, "0.2");
  if (rc == 77)
    printf("test_bench_output: no xmllint or HBG_TEST_SRC, built-in checks "
           "only\n");
  else
    ASSERT_EQ(rc, 0);
  free(s);

  /* the first policy 50 times slower: the others get a second panel on
   * their own scale, where they are wide enough to read */
  for (uint32_t i = 0; i < ROUNDS; i++)
    for (int ph = 0; ph < BENCH_PH__COUNT; ph++)
      recs[i].ns[ph] *= 50;
  ASSERT_EQ(bench_result_compute(&r), 0);
  s = render(bench_write_svg, &r);
  ASSERT(xml_check(s) == NULL);
  ASSERT_UEQ(count(s, "<g class=\"panel\">"), 2);
  ASSERT_UEQ(count(s, "<g class=\"bar\">"), NPOL + NPOL - 1);
  ASSERT(strstr(s, "zoomed"));
  rc = svg_external(s, "0.2");
  ASSERT(rc == 0 || rc == 77);
  free(s);

  /* a degenerate result (all zero) still renders */
  for (uint32_t i = 0; i < NPOL * ROUNDS; i++)
    memset(recs[i].ns, 0, sizeof recs[i].ns);
  ASSERT_EQ(bench_result_compute(&r), 0);
  s = render(bench_write_svg, &r);
  ASSERT(xml_check(s) == NULL);
  ASSERT(!strstr(s, "nan") && !strstr(s, "inf"));
  ASSERT_UEQ(count(s, "<g class=\"panel\">"), 1);
  free(s);
}

/* ---- peer arms (hbg bench --arm) ---- */

#define NARM 2u
static bench_rec arecs[(NPOL + NARM) * ROUNDS];
static bench_policy_res apol[NPOL + NARM];

/* make_result's policies, then two peer arms: eager (control plane 20 us,
 * 300 launches per step) and cuda-graph (control plane 5 us, 1 launch and
 * 12 node updates per step, captured once in the warm-up: 900 us capture,
 * 1500 us instantiation); exec 60 us, device 30 us + round ns. */
static void make_arms(bench_result *r) {
  make_result(r);
  memcpy(arecs, recs, sizeof recs);
  memcpy(apol, pol, sizeof pol);
  memset(apol + NPOL, 0, NARM * sizeof apol[0]);
  for (uint32_t a = 0; a < NARM; a++) {
    bench_policy_res *p = &apol[NPOL + a];
    p->name = a ? "cuda-graph" : "eager";
    p->arm = 1;
    if (a) {
      p->capture_ns = 900000;
      p->instantiate_ns = 1500000;
      p->captures = 1;
    }
    for (uint32_t i = 0; i < ROUNDS; i++) {
      bench_rec *x = &arecs[(NPOL + a) * ROUNDS + i];
      memset(x, 0, sizeof *x);
      x->arm = NPOL + a;
      x->round = i;
      x->seq = 5 + i;
      x->ns[BENCH_PH_CONTROL] = a ? 5000 : 20000;
      x->ns[BENCH_PH_EXEC] = 60000 + i;
      x->ns[BENCH_PH_DEVICE] = 30000 + i;
      x->launches = a ? 1 : 300;
      x->updates = a ? 12 : 0;
      x->verified = i == ROUNDS - 1 ? 1 : -1;
      x->minflt = 0;
    }
  }
  r->pol = apol;
  r->recs = arecs;
  r->n_arms = NARM;
  r->n_recs = (NPOL + NARM) * ROUNDS;
  ASSERT_EQ(bench_result_compute(r), 0);
}

static void t_arms(void) {
  bench_result r;
  make_arms(&r);
  /* computed: means, ratios against the first policy; the caller's capture
   * kept */
  const bench_policy_res *e = &apol[NPOL], *g = &apol[NPOL + 1];
  ASSERT(fabs(e->launches - 300.0) < 1e-9 && fabs(g->launches - 1.0) < 1e-9);
  ASSERT(fabs(g->updates - 12.0) < 1e-9);
  ASSERT(fabs(e->ratio[BENCH_PH_CONTROL] - 5.0) < 1e-9);  /* 20 / 4 us */
  ASSERT(fabs(g->ratio[BENCH_PH_CONTROL] - 1.25) < 1e-9); /* 5 / 4 us */
  ASSERT(fabs(g->ph[BENCH_PH_DEVICE].median - 30003.0) < 1e-9);
  ASSERT_UEQ(g->capture_ns, 900000);
  ASSERT_UEQ(g->instantiate_ns, 1500000);
  ASSERT_UEQ(g->captures, 1);
  ASSERT(e->arm && g->arm && !apol[0].arm);
  ASSERT_UEQ(g->checked, 1);
  ASSERT_EQ(g->verified, 1);

  /* JSON: the policies as before, the arms in their own list with the
   * phases an arm has, the per-step counts and the capture apart */
  char *s = render(bench_write_json, &r);
  cJSON *root = cJSON_Parse(s);
  ASSERT(root);
  ASSERT_EQ(cJSON_GetArraySize(get(root, "policies")), NPOL);
  const cJSON *arms = get(root, "arms");
  ASSERT(cJSON_IsArray(arms));
  ASSERT_EQ(cJSON_GetArraySize(arms), NARM);
  for (uint32_t a = 0; a < NARM; a++) {
    const cJSON *p = cJSON_GetArrayItem(arms, (int)a);
    ASSERT_STREQ(cJSON_GetStringValue(get(p, "name")), apol[NPOL + a].name);
    num(get(p, "control_plane_us"), "median");
    num(get(p, "exec_us"), "trimmed_mean");
    num(get(p, "device_us"), "median");
    ASSERT(!cJSON_GetObjectItemCaseSensitive(p, "host_orch_us"));
    ASSERT(!cJSON_GetObjectItemCaseSensitive(p, "graph_upload_us"));
    ASSERT(!cJSON_GetObjectItemCaseSensitive(p, "graph_bytes_per_bind"));
    ASSERT_EQ(num(p, "binds"), ROUNDS);
    ASSERT(cJSON_IsTrue(get(p, "verified")));
    const cJSON *ra = get(p, "ratio_vs_first");
    ASSERT(fabs(num(ra, "control_plane") - (a ? 1.25 : 5.0)) < 1e-9);
    num(ra, "device");
    ASSERT(!cJSON_GetObjectItemCaseSensitive(ra, "graph_upload"));
  }
  const cJSON *je = cJSON_GetArrayItem(arms, 0), *jg = cJSON_GetArrayItem(arms, 1);
  ASSERT_EQ(num(je, "launches_per_step"), 300);
  ASSERT_EQ(num(je, "updates_per_step"), 0);
  ASSERT(cJSON_IsNull(get(je, "capture_us"))); /* never captured */
  ASSERT(cJSON_IsNull(get(je, "instantiate_us")));
  ASSERT_EQ(num(je, "captures"), 0);
  ASSERT_EQ(num(jg, "launches_per_step"), 1);
  ASSERT_EQ(num(jg, "updates_per_step"), 12);
  ASSERT(fabs(num(jg, "capture_us") - 900.0) < 1e-9);
  ASSERT(fabs(num(jg, "instantiate_us") - 1500.0) < 1e-9);
  ASSERT_EQ(num(jg, "captures"), 1);
  ASSERT(fabs(num(get(jg, "device_us"), "median") - 30.003) < 1e-9);
  cJSON_Delete(root);
  free(s);

  /* CSV: one row per measured step of every arm too, the columns alike */
  s = render(bench_write_csv, &r);
  size_t lines = 0, header_commas = 0;
  for (const char *p = s; *p; p++)
    lines += *p == '\n';
  for (const char *p = s; *p != '\n'; p++)
    header_commas += *p == ',';
  ASSERT_UEQ(lines, 1 + (NPOL + NARM) * ROUNDS);
  for (const char *p = strchr(s, '\n') + 1; *p; p = strchr(p, '\n') + 1) {
    size_t commas = 0;
    for (const char *q = p; *q != '\n'; q++)
      commas += *q == ',';
    ASSERT_UEQ(commas, header_commas);
  }
  ASSERT(strstr(s, "\ncuda-graph,3,8,5000,0,0,0,60003,30003,"));
  ASSERT(strstr(s, ",arm,1,12,900000,1500000,,,\n"));
  ASSERT(strstr(s, ",arm,300,0,0,0,,,\n"));
  ASSERT(strstr(s, ",policy,,,,,,,\n"));
  free(s);

  /* table: arm rows with their three phases, the per-step table with the
   * capture, and ratios of those phases only */
  s = render(bench_print_table, &r);
  ASSERT(strstr(s, "peer arms: eager cuda-graph"));
  ASSERT(strstr(s, "\neager          control_plane         20.00"));
  ASSERT(strstr(s, "\ncuda-graph     control_plane          5.00"));
  ASSERT(strstr(s, "               device                30.00"));
  ASSERT(strstr(s, "capture us"));
  ASSERT(strstr(s, "\ncuda-graph            1.0       12.0       900.00"
                   "        1500.00         1  yes (1/1)"));
  ASSERT(strstr(s, "\neager               300.0        0.0         0.00"
                   "           0.00         0  yes (1/1)"));
  const char *line = strstr(s, "\n  eager ");
  ASSERT(line);
  const char *eol = strchr(line + 1, '\n');
  ASSERT(eol);
  ASSERT(strstr(line, "control_plane 5.000x") < eol);
  const char *up = strstr(line, "graph_upload");
  ASSERT(!up || up > eol);
  free(s);

  /* SVG: a bar per policy and per arm (an arm's is its control plane) */
  s = render(bench_write_svg, &r);
  ASSERT(xml_check(s) == NULL);
  ASSERT_UGE(count(s, "<g class=\"bar\">"), NPOL + NARM);
  ASSERT(strstr(s, ">cuda-graph</text>"));
  ASSERT(strstr(s, "peer arm: control_plane"));
  ASSERT(strstr(s, "<tspan class=\"total\">20.0</tspan>")); /* eager */
  int rc = svg_external(s, "0.02");
  ASSERT(rc == 0 || rc == 77);
  free(s);
}

static void t_trace(void) {
  static const char *const procs[] = {"deferred", "coalesced"};
  static const char *const tracks[] = {"orchestration", "uploads",
                                       "copy engine", "device"};
  bench_trace_ev ev[] = {
      {0, 0, "orchestrate", 1000000, 50000, 0, 1},
      {0, 1, "submission", 1050000, 3000, 132752, 1},
      {0, 2, "h2d", 1051000, 1500, 132752, 1},
      {1, 3, "launch", 2000000, 900000, 0, 7},
      {1, 2, "h2d \"q\"", 1999000, 1234, 4096, 7},
  };
  size_t n = sizeof ev / sizeof ev[0];
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ASSERT(f);
  ASSERT_EQ(bench_write_trace(ev, n, procs, 2, tracks, 4, f), 0);
  ASSERT_EQ(fclose(f), 0);
  cJSON *root = cJSON_Parse(buf);
  ASSERT(root);
  const cJSON *te = get(root, "traceEvents");
  ASSERT(cJSON_IsArray(te));
  size_t nx = 0, nmeta = 0;
  double min_ts = 1e300;
  const cJSON *e;
  cJSON_ArrayForEach(e, te) {
    const char *ph = cJSON_GetStringValue(get(e, "ph"));
    ASSERT(ph);
    ASSERT(cJSON_IsString(get(e, "name")));
    num(e, "pid");
    num(e, "tid");
    if (!strcmp(ph, "M")) {
      nmeta++;
      ASSERT(cJSON_IsObject(get(e, "args")));
      continue;
    }
    ASSERT_STREQ(ph, "X");
    nx++;
    double ts = num(e, "ts"), dur = num(e, "dur");
    ASSERT(ts >= 0.0 && dur >= 0.0);
    if (ts < min_ts)
      min_ts = ts;
    ASSERT_GE(num(e, "pid"), 1);
    ASSERT_GE(num(e, "tid"), 1);
    if (!strcmp(cJSON_GetStringValue(get(e, "name")), "launch")) {
      ASSERT(fabs(ts - 1000.0) < 1e-9); /* us from the earliest event */
      ASSERT(fabs(dur - 900.0) < 1e-9);
      ASSERT_EQ(num(e, "pid"), 2);
      ASSERT_EQ(num(e, "tid"), 4);
    }
  }
  ASSERT_UEQ(nx, n);
  ASSERT_UEQ(nmeta, 2 * 2 + 2 * 4 * 2); /* process + thread name/sort */
  ASSERT(min_ts == 0.0);
  cJSON_Delete(root);
  free(buf);

  /* no events: still a valid trace */
  buf = NULL;
  f = open_memstream(&buf, &len);
  ASSERT(f);
  ASSERT_EQ(bench_write_trace(NULL, 0, procs, 1, tracks, 4, f), 0);
  ASSERT_EQ(fclose(f), 0);
  root = cJSON_Parse(buf);
  ASSERT(root && cJSON_IsArray(get(root, "traceEvents")));
  cJSON_Delete(root);
  free(buf);
}

int main(void) {
  t_compute();
  t_json();
  t_csv();
  t_table();
  t_xml_checker();
  t_arms();
  t_svg();
  t_trace();
  printf("test_bench_output: ok\n");
  return 0;
}
