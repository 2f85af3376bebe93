/* A hybrid MPI + OpenMP program for the interposer's tests (tests/mpi.rs), run with 4 ranks:
 * MPI_Init_thread asks for MPI_THREAD_MULTIPLE, then THREADS OpenMP threads of every rank
 * exchange ROUNDS messages around the ring at once, each thread on its own tag (one critical
 * section around the calls if the library gives less than MPI_THREAD_MULTIPLE), and the
 * master thread ends with an Allreduce. Prints the thread level it was given. */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>

enum { THREADS = 3, ROUNDS = 50 };

static void exchange(int right, int left, int tag) {
    int out = tag, in = -1;
    MPI_Sendrecv(&out, 1, MPI_INT, right, tag, &in, 1, MPI_INT, left, tag, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (in != tag) MPI_Abort(MPI_COMM_WORLD, 4);
}

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
#pragma omp parallel num_threads(THREADS)
    {
        int tag = omp_get_thread_num();
        for (int i = 0; i < ROUNDS; i++) {
            if (provided == MPI_THREAD_MULTIPLE) {
                exchange(right, left, tag);
            } else {
#pragma omp critical
                exchange(right, left, tag);
            }
        }
    }
    int one = 1, all = 0;
    MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("hybrid: level %d, %d ranks\n", provided, all);
    MPI_Finalize();
    return 0;
}
