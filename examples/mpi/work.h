/* The examples' computation: a fixed amount of floating-point work (not a sleep), so that a
 * compute gap costs the same on every run and network. */
#ifndef GYR_EXAMPLE_WORK_H
#define GYR_EXAMPLE_WORK_H
static double work(long n, double x) {
    for (long i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
    return x;
}
#endif
