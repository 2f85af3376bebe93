/* Master-worker: rank 0 hands out tasks of uneven size to whichever worker asks first
 * (MPI_Recv from MPI_ANY_SOURCE, answered by tag), until none are left.
 * Usage: master_worker [TASKS] [WORK]. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "work.h"

enum { ASK = 1, TASK = 2, STOP = 3 };

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int tasks = argc > 1 ? atoi(argv[1]) : 200;
    long flops = argc > 2 ? atol(argv[2]) : 100000;
    if (rank == 0) {
        int next = 0, stopped = 0;
        double result;
        while (stopped < size - 1) {
            MPI_Status st;
            MPI_Recv(&result, 1, MPI_DOUBLE, MPI_ANY_SOURCE, ASK, MPI_COMM_WORLD, &st);
            if (next < tasks) {
                MPI_Send(&next, 1, MPI_INT, st.MPI_SOURCE, TASK, MPI_COMM_WORLD);
                next++;
            } else {
                MPI_Send(&next, 1, MPI_INT, st.MPI_SOURCE, STOP, MPI_COMM_WORLD);
                stopped++;
            }
        }
        printf("master_worker: %d tasks on %d workers\n", tasks, size - 1);
    } else {
        double x = rank;
        for (;;) {
            int task;
            MPI_Status st;
            MPI_Send(&x, 1, MPI_DOUBLE, 0, ASK, MPI_COMM_WORLD);
            MPI_Recv(&task, 1, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            if (st.MPI_TAG == STOP) break;
            x = work(flops * (1 + task % 5), x);
        }
    }
    MPI_Finalize();
    return 0;
}
