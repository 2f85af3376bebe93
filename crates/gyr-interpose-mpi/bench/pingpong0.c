/* The MPI interposer's cost per call: N round trips of 0-byte MPI_Send / MPI_Recv between
 * ranks 0 and 1 after a warm-up, timed with MPI_Wtime. Rank 0 prints one JSON line:
 * {"ns_per_round_trip": ...}; a round trip is four calls on its critical path (a send and a
 * receive on each rank). Run it with and without libgyr_mpi.so preloaded (gyr-bench sim). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long n = argc > 1 ? atol(argv[1]) : 100000;
    double t0 = 0;
    for (long i = -n / 10; i < n; i++) {
        if (i == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        if (rank == 0) {
            MPI_Send(NULL, 0, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(NULL, 0, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(NULL, 0, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(NULL, 0, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    }
    double t1 = MPI_Wtime();
    if (rank == 0) printf("{\"ns_per_round_trip\":%.2f}\n", (t1 - t0) * 1e9 / n);
    MPI_Finalize();
    return 0;
}
