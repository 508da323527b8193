/* Runs any bundle on raw inputs: plain C, linked with the bundle's object file and libc
 * (pthreads for bundles built with --threads). Compiled with -DBUNDLE=name
 * -DBUNDLE_UPPER=NAME -DBUNDLE_HEADER='"name.h"'.
 *
 *   run_bundle WEIGHTS|- INPUT_0.bin... -o OUTPUT_0.bin... [-n ITERATIONS]
 *
 * WEIGHTS "-" takes the embedded weights. Each input file holds the raw bytes of that input
 * (row-major, the header's element type); outputs are written the same way. With -n, the
 * run is repeated and the median time per run is printed in milliseconds. */
#define _DEFAULT_SOURCE /* clock_gettime, madvise */
#include BUNDLE_HEADER

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(BUNDLE_THREADED)
#include <pthread.h>
#endif

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define INPUTS CAT(BUNDLE, _inputs)
#define OUTPUTS CAT(BUNDLE, _outputs)
#define NUM_INPUTS CAT(BUNDLE_UPPER, _NUM_INPUTS)
#define NUM_OUTPUTS CAT(BUNDLE_UPPER, _NUM_OUTPUTS)
#define CONSTANTS_SIZE CAT(BUNDLE_UPPER, _CONSTANTS_SIZE)
#define MUTABLES_SIZE CAT(BUNDLE_UPPER, _MUTABLES_SIZE)
#define ACTIVATIONS_SIZE CAT(BUNDLE_UPPER, _ACTIVATIONS_SIZE)
#define ALIGNMENT CAT(BUNDLE_UPPER, _ALIGNMENT)

#if defined(BUNDLE_THREADED)
/* A parallel-for that runs shares 1.. on fresh threads and share 0 on the caller. */
typedef struct {
  kiln_task_fn fn;
  void *task;
  int64_t tid, n;
} Share;

static void *runShare(void *p) {
  Share *s = (Share *)p;
  s->fn(s->task, s->tid, s->n);
  return NULL;
}

static void parallelFor(void *user, int64_t n, kiln_task_fn fn, void *task) {
  (void)user;
  pthread_t th[64];
  Share shares[64];
  for (int64_t t = 1; t < n && t < 64; t++) {
    shares[t].fn = fn;
    shares[t].task = task;
    shares[t].tid = t;
    shares[t].n = n;
    if (pthread_create(&th[t], NULL, runShare, &shares[t]) != 0)
      runShare(&shares[t]), th[t] = 0;
  }
  fn(task, 0, n);
  for (int64_t t = 1; t < n && t < 64; t++)
    if (th[t])
      pthread_join(th[t], NULL);
}
#define RUN(c, m, a) BUNDLE(c, m, a, parallelFor, NULL)
#else
#define RUN(c, m, a) BUNDLE(c, m, a)
#endif

/* Large regions 2 MB aligned and asked for transparent huge pages, as the JIT allocates
 * its arenas: the weights are streamed once per run, and with 4 KB pages every page of them
 * costs a TLB miss. */
static uint8_t *region(uint64_t size) {
  uint64_t align = size >= (4u << 20) ? (2u << 20) : ALIGNMENT;
  uint64_t bytes = (size + align - 1) / align * align;
  uint8_t *p = aligned_alloc(align, bytes ? bytes : align);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p && align > ALIGNMENT)
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

static int readFile(const char *path, uint8_t *dst, uint64_t size) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "run_bundle: cannot open '%s'\n", path);
    return -1;
  }
  size_t n = size ? fread(dst, 1, size, f) : 0;
  int extra = fgetc(f);
  fclose(f);
  if (n != size || extra != EOF) {
    fprintf(stderr, "run_bundle: '%s' does not hold %llu bytes\n", path, (unsigned long long)size);
    return -1;
  }
  return 0;
}

static double clockMs(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}
static double nowMs(void) { return clockMs(CLOCK_MONOTONIC); }
/* CPU time of the process, all threads: less sensitive than wall time to other load. */
static double cpuMs(void) { return clockMs(CLOCK_PROCESS_CPUTIME_ID); }

static int cmpDouble(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  const char *ins[NUM_INPUTS + 1] = {0}, *outs[NUM_OUTPUTS + 1] = {0};
  int nin = 0, nout = 0, iterations = 0, toOut = 0;
  if (argc < 2) {
    fprintf(stderr, "usage: run_bundle WEIGHTS|- INPUT... -o OUTPUT... [-n N]\n");
    return 2;
  }
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "-o"))
      toOut = 1;
    else if (!strcmp(argv[i], "-n") && i + 1 < argc)
      iterations = atoi(argv[++i]);
    else if (toOut && nout < NUM_OUTPUTS)
      outs[nout++] = argv[i];
    else if (!toOut && nin < NUM_INPUTS)
      ins[nin++] = argv[i];
    else {
      fprintf(stderr, "run_bundle: unexpected argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (nin != NUM_INPUTS || nout != NUM_OUTPUTS) {
    fprintf(stderr, "run_bundle: %d inputs and %d outputs expected\n", NUM_INPUTS, NUM_OUTPUTS);
    return 2;
  }
  uint8_t *constants;
  if (!strcmp(argv[1], "-")) {
#if CAT(BUNDLE_UPPER, _EMBEDDED_WEIGHTS)
    constants = (uint8_t *)CAT(BUNDLE, _weights);
#else
    fprintf(stderr, "run_bundle: this bundle has no embedded weights\n");
    return 2;
#endif
  } else {
    constants = region(CONSTANTS_SIZE);
    if (!constants || readFile(argv[1], constants, CONSTANTS_SIZE))
      return 1;
  }
  uint8_t *mutables = region(MUTABLES_SIZE), *activations = region(ACTIVATIONS_SIZE);
  if (!mutables || !activations)
    return 1;
  for (int k = 0; k < NUM_INPUTS; k++)
    if (readFile(ins[k], mutables + INPUTS[k].offset, INPUTS[k].size))
      return 1;
  double t0 = nowMs();
  int rc = RUN(constants, mutables, activations);
  double first = nowMs() - t0;
  if (rc) {
    fprintf(stderr, "run_bundle: the bundle returned %d\n", rc);
    return 1;
  }
  if (iterations > 0) {
    double *ms = malloc(sizeof(double) * (size_t)iterations);
    double *cpu = malloc(sizeof(double) * (size_t)iterations);
    for (int i = 0; i < iterations; i++) {
      double s = nowMs(), c = cpuMs();
      RUN(constants, mutables, activations);
      ms[i] = nowMs() - s;
      cpu[i] = cpuMs() - c;
    }
    qsort(ms, (size_t)iterations, sizeof(double), cmpDouble);
    qsort(cpu, (size_t)iterations, sizeof(double), cmpDouble);
    printf("first_ms %.3f median_ms %.3f min_ms %.3f cpu_median_ms %.3f cpu_min_ms %.3f\n", first,
           ms[iterations / 2], ms[0], cpu[iterations / 2], cpu[0]);
    free(ms);
    free(cpu);
  }
  for (int k = 0; k < NUM_OUTPUTS; k++) {
    FILE *f = fopen(outs[k], "wb");
    if (!f || fwrite(mutables + OUTPUTS[k].offset, 1, OUTPUTS[k].size, f) != OUTPUTS[k].size) {
      fprintf(stderr, "run_bundle: cannot write '%s'\n", outs[k]);
      return 1;
    }
    fclose(f);
  }
  if (strcmp(argv[1], "-"))
    free(constants);
  free(mutables);
  free(activations);
  return 0;
}
