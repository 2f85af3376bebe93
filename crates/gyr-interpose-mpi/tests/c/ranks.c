/* MPI scenarios for the interposer's tests (tests/mpi.rs), run with 4 ranks.
 *
 * `all`: point-to-point (blocking, nonblocking, persistent, wildcards, PROC_NULL, Sendrecv),
 * the Wait and Test families, a Comm_split communicator, a Cart_create one, and collectives.
 * `abort`: rank 1 aborts after its first messages; the others wait in a barrier. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static void p2p(void) {
    int buf[64] = {0}, in[64] = {0};
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Status st;
    MPI_Request rq[4];

    /* A ring of blocking messages: even ranks send first. */
    if (rank % 2 == 0) {
        MPI_Send(buf, 8, MPI_INT, right, 10, MPI_COMM_WORLD);
        MPI_Recv(in, 8, MPI_INT, left, 10, MPI_COMM_WORLD, &st);
    } else {
        MPI_Recv(in, 8, MPI_INT, left, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Ssend(buf, 8, MPI_INT, right, 10, MPI_COMM_WORLD);
    }

    /* Nonblocking both ways, completed by Waitall with ignored statuses. */
    MPI_Irecv(in, 4, MPI_DOUBLE, left, 11, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(buf, 4, MPI_DOUBLE, right, 11, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);

    /* Wildcards: everyone sends rank 0 a message with tag 100 + rank. */
    if (rank == 0) {
        /* A wildcard Irecv completed by Test in a loop; posted first, so that the tag-200
         * message matches it rather than one of the any-tag receives. */
        int flag = 0, got[64];
        MPI_Irecv(got, 64, MPI_INT, MPI_ANY_SOURCE, 200, MPI_COMM_WORLD, &rq[0]);
        for (int i = 1; i < size; i++) {
            MPI_Recv(in, 64, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        }
        while (!flag) MPI_Test(&rq[0], &flag, MPI_STATUS_IGNORE);
    } else {
        MPI_Send(buf, rank, MPI_INT, 0, 100 + rank, MPI_COMM_WORLD);
        if (rank == size - 1) MPI_Send(buf, 3, MPI_INT, 0, 200, MPI_COMM_WORLD);
    }
    /* No later message may reach rank 0's any-tag receives. */
    MPI_Barrier(MPI_COMM_WORLD);

    /* Persistent requests, started twice. */
    MPI_Recv_init(in, 2, MPI_INT, left, 12, MPI_COMM_WORLD, &rq[0]);
    MPI_Send_init(buf, 2, MPI_INT, right, 12, MPI_COMM_WORLD, &rq[1]);
    for (int k = 0; k < 2; k++) {
        MPI_Startall(2, rq);
        int idx, done = 0;
        while (done < 2) {
            MPI_Waitany(2, rq, &idx, &st);
            done++;
        }
    }
    MPI_Request_free(&rq[0]);
    MPI_Request_free(&rq[1]);

    /* Waitsome and Testany over a pair. */
    MPI_Irecv(in, 1, MPI_INT, left, 13, MPI_COMM_WORLD, &rq[0]);
    MPI_Issend(buf, 1, MPI_INT, right, 13, MPI_COMM_WORLD, &rq[1]);
    int outcount, idx[2], left_to_do = 2;
    MPI_Status sts[2];
    while (left_to_do > 0) {
        MPI_Waitsome(2, rq, &outcount, idx, sts);
        left_to_do -= outcount;
    }

    /* PROC_NULL: nothing recorded as a message. */
    MPI_Send(buf, 1, MPI_INT, MPI_PROC_NULL, 14, MPI_COMM_WORLD);
    MPI_Recv(in, 1, MPI_INT, MPI_PROC_NULL, 14, MPI_COMM_WORLD, &st);

    /* Sendrecv around the ring the other way. */
    MPI_Sendrecv(buf, 5, MPI_INT, left, 15, in, 5, MPI_INT, right, 15, MPI_COMM_WORLD, &st);
    MPI_Sendrecv_replace(buf, 6, MPI_INT, right, 16, left, 16, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    /* Probe then receive. */
    if (rank == 1) MPI_Send(buf, 7, MPI_INT, 2, 17, MPI_COMM_WORLD);
    if (rank == 2) {
        MPI_Probe(1, 17, MPI_COMM_WORLD, &st);
        MPI_Recv(in, 7, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st);
    }
}

static void comms(void) {
    /* Split into odd and even ranks, reversed: messages in it carry world ranks. */
    MPI_Comm half, cart;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    int hr, hs, buf[4] = {0};
    MPI_Comm_rank(half, &hr);
    MPI_Comm_size(half, &hs);
    if (hr == 0) {
        MPI_Send(buf, 4, MPI_INT, 1, 20, half);
    } else if (hr == 1) {
        MPI_Recv(buf, 4, MPI_INT, MPI_ANY_SOURCE, 20, half, MPI_STATUS_IGNORE);
    }
    MPI_Allreduce(MPI_IN_PLACE, buf, 4, MPI_INT, MPI_SUM, half);
    MPI_Comm_free(&half);

    int dims[1] = {size}, periods[1] = {1};
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
    int src, dst;
    MPI_Cart_shift(cart, 0, 1, &src, &dst);
    MPI_Sendrecv_replace(buf, 1, MPI_INT, dst, 21, src, 21, cart, MPI_STATUS_IGNORE);
    MPI_Comm_free(&cart);
}

static void collectives(void) {
    double x[16] = {0}, y[16 * 8] = {0};
    int counts[8], displs[8];
    for (int i = 0; i < size; i++) { counts[i] = 2; displs[i] = 2 * i; }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Bcast(x, 16, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    MPI_Reduce(x, y, 16, MPI_DOUBLE, MPI_SUM, 2, MPI_COMM_WORLD);
    MPI_Allreduce(x, y, 16, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Gather(x, 2, MPI_DOUBLE, y, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gatherv(x, 2, MPI_DOUBLE, y, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Scatter(y, 2, MPI_DOUBLE, x, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Scatterv(y, counts, displs, MPI_DOUBLE, x, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Allgather(x, 2, MPI_DOUBLE, y, 2, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Allgatherv(x, 2, MPI_DOUBLE, y, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Alltoall(y, 2, MPI_DOUBLE, y + 64, 2, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Alltoallv(y, counts, displs, MPI_DOUBLE, y + 64, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD);
    MPI_Reduce_scatter_block(y, x, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Reduce_scatter(y, x, counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Scan(x, y, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Exscan(x, y, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);

    /* The nonblocking ones, each completed by its own wait; separate buffers, since they may
     * all be in progress at once. */
    double bx[16] = {0}, rx[16], ax[16] = {0}, ar[16], gx[2] = {0}, gy[16], sx[16] = {0}, sy[2],
           lx[2] = {0}, ly[16], tx[16] = {0}, ty[16];
    MPI_Request rq[8];
    MPI_Ibarrier(MPI_COMM_WORLD, &rq[0]);
    MPI_Ibcast(bx, 16, MPI_DOUBLE, 1, MPI_COMM_WORLD, &rq[1]);
    MPI_Ireduce(ax, rx, 16, MPI_DOUBLE, MPI_SUM, 2, MPI_COMM_WORLD, &rq[2]);
    MPI_Iallreduce(ax, ar, 16, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq[3]);
    MPI_Igather(gx, 2, MPI_DOUBLE, gy, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD, &rq[4]);
    MPI_Iscatter(sx, 2, MPI_DOUBLE, sy, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD, &rq[5]);
    MPI_Iallgather(lx, 2, MPI_DOUBLE, ly, 2, MPI_DOUBLE, MPI_COMM_WORLD, &rq[6]);
    MPI_Ialltoall(tx, 2, MPI_DOUBLE, ty, 2, MPI_DOUBLE, MPI_COMM_WORLD, &rq[7]);
    MPI_Waitall(8, rq, MPI_STATUSES_IGNORE);

    /* Their forms with counts per rank, and the scans. */
    double vx[16] = {0}, vy[16], wx[16] = {0}, wy[16], px[16] = {0}, py[16], qx[16] = {0},
           qy[16], ex[16] = {0}, ey[16], fx[16] = {0}, fy[16], cx[3] = {0}, cy[3], dx[3] = {0},
           dy[3];
    MPI_Igatherv(vx, 2, MPI_DOUBLE, vy, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD, &rq[0]);
    MPI_Iscatterv(wx, counts, displs, MPI_DOUBLE, wy, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD, &rq[1]);
    MPI_Iallgatherv(px, 2, MPI_DOUBLE, py, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD, &rq[2]);
    MPI_Ialltoallv(qx, counts, displs, MPI_DOUBLE, qy, counts, displs, MPI_DOUBLE,
                   MPI_COMM_WORLD, &rq[3]);
    MPI_Ireduce_scatter_block(ex, ey, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq[4]);
    MPI_Ireduce_scatter(fx, fy, counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq[5]);
    MPI_Iscan(cx, cy, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq[6]);
    MPI_Iexscan(dx, dy, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq[7]);
    MPI_Waitall(8, rq, MPI_STATUSES_IGNORE);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *what = argc > 1 ? argv[1] : "all";
    if (strcmp(what, "abort") == 0) {
        int buf[4] = {0};
        MPI_Send(buf, 4, MPI_INT, (rank + 1) % size, 1, MPI_COMM_WORLD);
        MPI_Recv(buf, 4, MPI_INT, (rank + size - 1) % size, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rank == 1) abort();
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
    } else {
        p2p();
        comms();
        collectives();
    }
    MPI_Finalize();
    printf("rank %d done\n", rank);
    return 0;
}
