/* gyr sim calibrate's measuring program: ping-pong and streaming between ranks 0 and 1, with
 * warm-up, timed with MPI_Wtime (not traced, so that no monitoring cost enters the model).
 * gyr compiles it with mpicc and runs it with mpirun; rank 0 prints one line per measurement:
 *   connect NS  (the first round trip's time over the second's: a lazy connection's cost;
 *                alone when run as `calibrate passive`)
 *   connect_crossing NS  (run as `calibrate crossing`, alone: the same when both ranks send
 *                         first, as in an exchange)
 *   pingpong BYTES HALF_ROUND_TRIP_NS SEND_CALL_NS
 *   stream BYTES NS_PER_MESSAGE
 * (medians over the repetitions). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof(double), cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Rank 0 pauses 1 ms before a passive connection, so that rank 1 already waits in its
 * receive, as a receiver that is not sending does: Open MPI polls for a connection when a
 * receive starts, then every 10 ms, and a rank 1 still leaving MPI_Init would accept at once.
 * The pause comes off the wait measured (9 ms, not 10): less than a late rank 1's error. */
static void settle(int rank) {
    if (rank == 0) usleep(1000);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        if (rank == 0) fprintf(stderr, "calibrate: needs 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    int crossing = argc > 1 && strcmp(argv[1], "crossing") == 0;
    if (crossing || (argc > 1 && strcmp(argv[1], "passive") == 0)) {
        /* A connection alone, twice the first exchange's time over the second's: crossing,
         * both ranks send to each other at once (each side, connecting too, answers the
         * other); passive, rank 1 waits for rank 0's message before it replies. */
        char out = 0, in;
        double t[2];
        if (!crossing) settle(rank);
        for (int i = 0; i < 2; i++) {
            double t0 = MPI_Wtime();
            if (crossing && rank < 2) {
                MPI_Sendrecv(&out, 1, MPI_BYTE, 1 - rank, 5, &in, 1, MPI_BYTE, 1 - rank, 5,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 0) {
                MPI_Send(&out, 1, MPI_BYTE, 1, 5, MPI_COMM_WORLD);
                MPI_Recv(&in, 1, MPI_BYTE, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(&in, 1, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(&out, 1, MPI_BYTE, 0, 5, MPI_COMM_WORLD);
            }
            t[i] = MPI_Wtime() - t0;
        }
        if (rank == 0)
            printf("%s %.1f\n", crossing ? "connect_crossing" : "connect",
                   t[0] > t[1] ? (t[0] - t[1]) * 1e9 : 0.0);
        MPI_Finalize();
        return 0;
    }
    long max_bytes = argc > 1 ? atol(argv[1]) : 4L << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 30;
    char *buf = calloc(max_bytes > 0 ? max_bytes : 1, 1);
    double *rtt = malloc(sizeof(double) * reps), *snd = malloc(sizeof(double) * reps);
    if (!buf || !rtt || !snd) MPI_Abort(MPI_COMM_WORLD, 3);
    enum { STREAM = 64 };
    MPI_Request reqs[STREAM];
    /* The first messages between the two ranks, before anything else: a transport that
     * connects on first use (Open MPI's tcp) pays for it here, once. */
    double first[2];
    settle(rank);
    for (int i = 0; i < 2; i++) {
        double t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, 1, MPI_BYTE, 1, 4, MPI_COMM_WORLD);
            MPI_Recv(buf, 1, MPI_BYTE, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, 1, MPI_BYTE, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 1, MPI_BYTE, 0, 4, MPI_COMM_WORLD);
        }
        first[i] = MPI_Wtime() - t0;
    }
    if (rank == 0) printf("connect %.1f\n", first[0] > first[1] ? (first[0] - first[1]) * 1e9 : 0.0);
    for (long bytes = 1; bytes <= max_bytes; bytes *= 2) {
        int n = bytes >= (1L << 20) ? (reps < 10 ? reps : 10) : reps;
        /* Ping-pong: warm-up, then n timed round trips. */
        for (int i = -5; i < n; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0) {
                double t0 = MPI_Wtime();
                MPI_Send(buf, (int)bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                double t1 = MPI_Wtime();
                MPI_Recv(buf, (int)bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                double t2 = MPI_Wtime();
                if (i >= 0) {
                    rtt[i] = (t2 - t0) / 2 * 1e9;
                    snd[i] = (t1 - t0) * 1e9;
                }
            } else if (rank == 1) {
                MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) printf("pingpong %ld %.1f %.1f\n", bytes, median(rtt, n), median(snd, n));
        /* Streaming: STREAM messages back to back, then one acknowledgement. */
        if (bytes <= 65536) {
            for (int i = -2; i < n; i++) {
                MPI_Barrier(MPI_COMM_WORLD);
                if (rank == 0) {
                    double t0 = MPI_Wtime();
                    for (int k = 0; k < STREAM; k++)
                        MPI_Isend(buf, (int)bytes, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &reqs[k]);
                    MPI_Waitall(STREAM, reqs, MPI_STATUSES_IGNORE);
                    MPI_Recv(NULL, 0, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    double t1 = MPI_Wtime();
                    if (i >= 0) rtt[i] = (t1 - t0) * 1e9 / STREAM;
                } else if (rank == 1) {
                    char *in = malloc((size_t)bytes * STREAM);
                    if (!in) MPI_Abort(MPI_COMM_WORLD, 3);
                    for (int k = 0; k < STREAM; k++)
                        MPI_Irecv(in + (size_t)k * bytes, (int)bytes, MPI_BYTE, 0, 2, MPI_COMM_WORLD,
                                  &reqs[k]);
                    MPI_Waitall(STREAM, reqs, MPI_STATUSES_IGNORE);
                    MPI_Send(NULL, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
                    free(in);
                }
            }
            if (rank == 0) printf("stream %ld %.1f\n", bytes, median(rtt, n));
        }
        fflush(stdout);
    }
    free(buf);
    free(rtt);
    free(snd);
    MPI_Finalize();
    return 0;
}
