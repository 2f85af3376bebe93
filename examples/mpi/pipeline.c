/* A pipeline: blocks flow from rank 0 through every rank in turn; each stage receives a block,
 * works on it and passes it on (MPI_Recv, MPI_Send).  Usage: pipeline [BLOCKS] [BYTES] [WORK]. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "work.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int blocks = argc > 1 ? atoi(argv[1]) : 100;
    int bytes = argc > 2 ? atoi(argv[2]) : 65536;
    long flops = argc > 3 ? atol(argv[3]) : 300000;
    char *buf = calloc(bytes, 1);
    double x = rank;
    for (int b = 0; b < blocks; b++) {
        if (rank > 0) MPI_Recv(buf, bytes, MPI_BYTE, rank - 1, b, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        x = work(flops, x);
        if (rank < size - 1) MPI_Send(buf, bytes, MPI_BYTE, rank + 1, b, MPI_COMM_WORLD);
    }
    if (rank == size - 1) printf("pipeline: %d blocks through %d stages (%g)\n", blocks, size, x);
    free(buf);
    MPI_Finalize();
    return 0;
}
