/* Nonblocking overlap: each step posts the halo exchange (MPI_Irecv, MPI_Isend), computes the
 * interior meanwhile, then waits (MPI_Waitall) and computes the boundary.
 * Usage: overlap [STEPS] [HALO_BYTES] [WORK]. */
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
    int bytes = argc > 2 ? atoi(argv[2]) : 32768;
    long flops = argc > 3 ? atol(argv[3]) : 300000;
    char *out = calloc(bytes, 1), *inl = calloc(bytes, 1), *inr = calloc(bytes, 1);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    double x = rank;
    for (int s = 0; s < steps; s++) {
        MPI_Request r[4];
        MPI_Irecv(inl, bytes, MPI_BYTE, left, 1, MPI_COMM_WORLD, &r[0]);
        MPI_Irecv(inr, bytes, MPI_BYTE, right, 2, MPI_COMM_WORLD, &r[1]);
        MPI_Isend(out, bytes, MPI_BYTE, right, 1, MPI_COMM_WORLD, &r[2]);
        MPI_Isend(out, bytes, MPI_BYTE, left, 2, MPI_COMM_WORLD, &r[3]);
        x = work(flops, x);
        MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
        x = work(flops / 10, x);
    }
    if (rank == 0) printf("overlap: %d steps on %d ranks (%g)\n", steps, size, x);
    free(out);
    free(inl);
    free(inr);
    MPI_Finalize();
    return 0;
}
