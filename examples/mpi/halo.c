/* Halo exchange: a 1-D domain split over the ranks (a ring), each step trading boundary cells
 * with both neighbours (MPI_Sendrecv), computing, and every 10 steps agreeing on a residual
 * (MPI_Allreduce).  Usage: halo [STEPS] [HALO_BYTES] [WORK]. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "work.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int steps = argc > 1 ? atoi(argv[1]) : 200;
    int bytes = argc > 2 ? atoi(argv[2]) : 8192;
    long flops = argc > 3 ? atol(argv[3]) : 200000;
    char *out = calloc(bytes, 1), *in = calloc(bytes, 1);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    double x = rank, residual = 0;
    for (int s = 0; s < steps; s++) {
        MPI_Sendrecv(out, bytes, MPI_BYTE, right, 1, in, bytes, MPI_BYTE, left, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        MPI_Sendrecv(out, bytes, MPI_BYTE, left, 2, in, bytes, MPI_BYTE, right, 2, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        x = work(flops * (1 + rank % 2), x);
        if (s % 10 == 9) {
            double local = x;
            MPI_Allreduce(&local, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        }
    }
    if (rank == 0) printf("halo: %d steps on %d ranks, residual %g\n", steps, size, residual);
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}
