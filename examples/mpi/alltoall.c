/* All-to-all: a distributed transpose (MPI_Alltoall) between compute phases, as FFT-based
 * solvers do.  Usage: alltoall [STEPS] [BYTES_PER_PAIR] [WORK]. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "work.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int steps = argc > 1 ? atoi(argv[1]) : 50;
    int block = argc > 2 ? atoi(argv[2]) : 16384;
    long flops = argc > 3 ? atol(argv[3]) : 500000;
    char *out = calloc((size_t)block * size, 1), *in = calloc((size_t)block * size, 1);
    double x = rank;
    for (int s = 0; s < steps; s++) {
        x = work(flops, x);
        MPI_Alltoall(out, block, MPI_BYTE, in, block, MPI_BYTE, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("alltoall: %d transposes on %d ranks (%g)\n", steps, size, x);
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}
