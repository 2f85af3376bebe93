/* The pthread programs gyr-interpose's tests run under the interposer: one scenario per
 * command-line argument (see usage below). Each checks its own results and exits non-zero when
 * one is wrong, so a test also catches an interposer that changed what the program computed. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
            exit(99);                                                             \
        }                                                                         \
    } while (0)

static void deadline_in(struct timespec *ts, long ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_nsec += (ms % 1000) * 1000000L;
    ts->tv_sec += ms / 1000 + ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
}

/* ---- pool: a thread pool with a work queue ---------------------------------------------- */

#define TASKS 2000
#define WORKERS 4

static struct {
    pthread_mutex_t lock;
    pthread_cond_t not_empty;
    int items[64];
    int head, tail, count;
    int closed;
} queue = {.lock = PTHREAD_MUTEX_INITIALIZER, .not_empty = PTHREAD_COND_INITIALIZER};

static pthread_mutex_t total_lock = PTHREAD_MUTEX_INITIALIZER;
static long total;
static pthread_mutex_t recursive;

static void *pool_worker(void *arg) {
    (void)arg;
    CHECK(errno == 0); /* a thread starts with errno 0, whatever gyr did to start it */
    for (;;) {
        pthread_mutex_lock(&queue.lock);
        while (queue.count == 0 && !queue.closed)
            pthread_cond_wait(&queue.not_empty, &queue.lock);
        if (queue.count == 0) {
            pthread_mutex_unlock(&queue.lock);
            return NULL;
        }
        int item = queue.items[queue.head];
        queue.head = (queue.head + 1) % 64;
        queue.count--;
        pthread_mutex_unlock(&queue.lock);

        if (item % 3 == 0) {
            /* A recursive mutex taken twice: one hold recorded. */
            pthread_mutex_lock(&recursive);
            CHECK(pthread_mutex_trylock(&recursive) == 0);
            pthread_mutex_lock(&total_lock);
            total += item;
            pthread_mutex_unlock(&total_lock);
            pthread_mutex_unlock(&recursive);
            pthread_mutex_unlock(&recursive);
        } else if (item % 3 == 1) {
            while (pthread_mutex_trylock(&total_lock) == EBUSY)
                ;
            total += item;
            pthread_mutex_unlock(&total_lock);
        } else {
            struct timespec ts;
            deadline_in(&ts, 10000);
            CHECK(pthread_mutex_timedlock(&total_lock, &ts) == 0);
            total += item;
            pthread_mutex_unlock(&total_lock);
        }
    }
}

static int pool(void) {
    CHECK(errno == 0); /* as the C library leaves it at startup */
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&recursive, &a);
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        CHECK(pthread_create(&t[i], NULL, pool_worker, NULL) == 0);
    for (int i = 1; i <= TASKS; i++) {
        pthread_mutex_lock(&queue.lock);
        while (queue.count == 64) {
            pthread_mutex_unlock(&queue.lock);
            sched_yield();
            pthread_mutex_lock(&queue.lock);
        }
        queue.items[queue.tail] = i;
        queue.tail = (queue.tail + 1) % 64;
        queue.count++;
        pthread_cond_signal(&queue.not_empty);
        pthread_mutex_unlock(&queue.lock);
    }
    pthread_mutex_lock(&queue.lock);
    queue.closed = 1;
    pthread_cond_broadcast(&queue.not_empty);
    pthread_mutex_unlock(&queue.lock);
    for (int i = 0; i < WORKERS; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    CHECK(total == (long)TASKS * (TASKS + 1) / 2);
    CHECK(pthread_mutex_destroy(&recursive) == 0);
    /* Error codes pass through: an error-checking mutex refuses a second lock. */
    pthread_mutex_t ec;
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&ec, &a);
    CHECK(pthread_mutex_lock(&ec) == 0);
    CHECK(pthread_mutex_lock(&ec) == EDEADLK);
    CHECK(pthread_mutex_unlock(&ec) == 0);
    CHECK(pthread_mutex_unlock(&ec) == EPERM);
    CHECK(pthread_mutex_destroy(&ec) == 0);
    pthread_mutexattr_destroy(&a);
    /* errno is the program's: what gyr does inside the calls does not show. */
    errno = 4242;
    pthread_mutex_lock(&total_lock);
    CHECK(errno == 4242);
    CHECK(pthread_mutex_trylock(&total_lock) == EBUSY);
    pthread_cond_signal(&queue.not_empty);
    pthread_mutex_unlock(&total_lock);
    CHECK(errno == 4242);
    printf("pool: total %ld\n", total);
    return 0;
}

/* ---- prodcons: a bounded buffer, condition variables, timed waits ------------------------ */

#define ITEMS 1000
#define SLOTS 4

static pthread_mutex_t buf_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static int buf[SLOTS], buf_count, buf_head;
static long consumed_sum;
static int timeouts;

static void *consumer(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&buf_lock);
        while (buf_count == 0) {
            struct timespec ts;
            deadline_in(&ts, 1);
            int r = pthread_cond_timedwait(&not_empty, &buf_lock, &ts);
            CHECK(r == 0 || r == ETIMEDOUT);
            if (r == ETIMEDOUT)
                timeouts++;
        }
        int item = buf[buf_head];
        buf_head = (buf_head + 1) % SLOTS;
        buf_count--;
        pthread_cond_signal(&not_full);
        pthread_mutex_unlock(&buf_lock);
        if (item < 0)
            return NULL;
        pthread_mutex_lock(&total_lock);
        consumed_sum += item;
        pthread_mutex_unlock(&total_lock);
    }
}

static void put(int item) {
    pthread_mutex_lock(&buf_lock);
    while (buf_count == SLOTS)
        pthread_cond_wait(&not_full, &buf_lock);
    buf[(buf_head + buf_count) % SLOTS] = item;
    buf_count++;
    pthread_cond_broadcast(&not_empty);
    pthread_mutex_unlock(&buf_lock);
}

static int prodcons(void) {
    pthread_t c[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&c[i], NULL, consumer, NULL) == 0);
    for (int i = 1; i <= ITEMS; i++) {
        put(i);
        if (i % 100 == 0)
            usleep(2000); /* let the consumers time out now and then */
    }
    put(-1);
    put(-1);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(c[i], NULL) == 0);
    CHECK(consumed_sum == (long)ITEMS * (ITEMS + 1) / 2);
    /* A timed wait that must time out returns ETIMEDOUT with the mutex held. */
    pthread_mutex_lock(&buf_lock);
    struct timespec ts;
    deadline_in(&ts, 1);
    CHECK(pthread_cond_timedwait(&not_empty, &buf_lock, &ts) == ETIMEDOUT);
    CHECK(pthread_mutex_trylock(&buf_lock) == EBUSY);
    pthread_mutex_unlock(&buf_lock);
    printf("prodcons: sum %ld, %d timeouts\n", consumed_sum, timeouts);
    return 0;
}

/* ---- detached: threads nobody joins ------------------------------------------------------ */

static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cond = PTHREAD_COND_INITIALIZER;
static int done;

static void *detached_worker(void *arg) {
    long how = (long)arg;
    if (how == 1)
        CHECK(pthread_detach(pthread_self()) == 0);
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&total_lock);
        total++;
        pthread_mutex_unlock(&total_lock);
    }
    pthread_mutex_lock(&done_lock);
    done++;
    pthread_cond_signal(&done_cond);
    pthread_mutex_unlock(&done_lock);
    return NULL;
}

static int detached(void) {
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    for (long i = 0; i < 9; i++) {
        pthread_t t;
        long how = i % 3; /* 0: detached by attribute, 1: by itself, 2: by its parent */
        CHECK(pthread_create(&t, how == 0 ? &a : NULL, detached_worker, (void *)how) == 0);
        if (how == 2)
            CHECK(pthread_detach(t) == 0);
    }
    pthread_attr_destroy(&a);
    pthread_mutex_lock(&done_lock);
    while (done < 9)
        pthread_cond_wait(&done_cond, &done_lock);
    pthread_mutex_unlock(&done_lock);
    printf("detached: %d done\n", done);
    return 0; /* returns while the detached threads may still be ending */
}

/* ---- barrier: generations of a barrier, then one made again ------------------------------ */

static pthread_barrier_t barrier;

static void *barrier_worker(void *arg) {
    (void)arg;
    int serial = 0;
    for (int g = 0; g < 10; g++) {
        int r = pthread_barrier_wait(&barrier);
        CHECK(r == 0 || r == PTHREAD_BARRIER_SERIAL_THREAD);
        serial += r == PTHREAD_BARRIER_SERIAL_THREAD;
        pthread_mutex_lock(&total_lock);
        total++;
        pthread_mutex_unlock(&total_lock);
    }
    return (void *)(long)serial;
}

static int barrier_scenario(void) {
    CHECK(pthread_barrier_init(&barrier, NULL, 4) == 0);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, barrier_worker, NULL) == 0);
    long serials = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        CHECK(pthread_join(t[i], &r) == 0);
        serials += (long)r;
    }
    CHECK(serials == 10);
    CHECK(pthread_barrier_destroy(&barrier) == 0);
    /* The same address, a new barrier of 2. */
    CHECK(pthread_barrier_init(&barrier, NULL, 2) == 0);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, barrier_worker, NULL) == 0);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    CHECK(pthread_barrier_destroy(&barrier) == 0);
    printf("barrier: total %ld\n", total);
    return 0;
}

/* ---- rwlock: readers and writers, with try and timed variants ---------------------------- */

static pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;
static long table_value;

static void *writer(void *arg) {
    (void)arg;
    for (int i = 0; i < 200; i++) {
        if (i % 3 == 0) {
            while (pthread_rwlock_trywrlock(&table_lock) == EBUSY)
                sched_yield();
        } else if (i % 3 == 1) {
            struct timespec ts;
            deadline_in(&ts, 10000);
            CHECK(pthread_rwlock_timedwrlock(&table_lock, &ts) == 0);
        } else {
            CHECK(pthread_rwlock_wrlock(&table_lock) == 0);
        }
        table_value++;
        pthread_rwlock_unlock(&table_lock);
    }
    return NULL;
}

static void *reader(void *arg) {
    (void)arg;
    long last = 0;
    for (int i = 0; i < 300; i++) {
        if (i % 3 == 0) {
            while (pthread_rwlock_tryrdlock(&table_lock) == EBUSY)
                sched_yield();
        } else if (i % 3 == 1) {
            struct timespec ts;
            deadline_in(&ts, 10000);
            CHECK(pthread_rwlock_timedrdlock(&table_lock, &ts) == 0);
        } else {
            CHECK(pthread_rwlock_rdlock(&table_lock) == 0);
        }
        CHECK(table_value >= last);
        last = table_value;
        pthread_rwlock_unlock(&table_lock);
    }
    return NULL;
}

static int rwlock(void) {
    pthread_t t[5];
    for (int i = 0; i < 5; i++)
        CHECK(pthread_create(&t[i], NULL, i < 2 ? writer : reader, NULL) == 0);
    for (int i = 0; i < 5; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    CHECK(table_value == 400);
    CHECK(pthread_rwlock_wrlock(&table_lock) == 0);
    CHECK(pthread_rwlock_wrlock(&table_lock) == EDEADLK);
    CHECK(pthread_rwlock_unlock(&table_lock) == 0);
    printf("rwlock: %ld writes\n", table_value);
    return 0;
}

/* ---- fork: children, one that runs on, one that executes this program again -------------- */

static volatile int stop_spinning;

static void *spinner(void *arg) {
    (void)arg;
    while (!stop_spinning) {
        pthread_mutex_lock(&total_lock);
        total++;
        pthread_mutex_unlock(&total_lock);
    }
    return NULL;
}

static void *child_thread(void *arg) {
    (void)arg;
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&done_lock);
        done++;
        pthread_cond_broadcast(&done_cond);
        pthread_mutex_unlock(&done_lock);
    }
    return NULL;
}

static int fork_scenario(const char *self) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, spinner, NULL) == 0);
    usleep(20000);
    /* A child that runs on without exec: locks, a thread, a join, exit(). The parent holds
     * the spinners' mutex across the fork, so that the child does not inherit it locked by a
     * thread it does not have. */
    pthread_mutex_lock(&total_lock);
    pid_t pid = fork();
    CHECK(pid >= 0);
    pthread_mutex_unlock(&total_lock);
    if (pid == 0) {
        pthread_t c;
        CHECK(pthread_create(&c, NULL, child_thread, NULL) == 0);
        for (int i = 0; i < 1000; i++) {
            pthread_mutex_lock(&total_lock);
            total++;
            pthread_mutex_unlock(&total_lock);
        }
        CHECK(pthread_join(c, NULL) == 0);
        exit(done == 1000 ? 7 : 98);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 7);
    /* A child that executes this program again: it writes a trace of its own. */
    pid_t exec_pid = fork();
    CHECK(exec_pid >= 0);
    if (exec_pid == 0) {
        execl(self, self, "pool", (char *)NULL);
        _exit(97);
    }
    CHECK(waitpid(exec_pid, &status, 0) == exec_pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    usleep(20000);
    stop_spinning = 1;
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    printf("fork: children %d %d\n", (int)pid, (int)exec_pid);
    return 0;
}

/* ---- exit: exit() from a worker while others hold locks --------------------------------- */

static pthread_barrier_t holding;
static pthread_mutex_t held[3] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
                                  PTHREAD_MUTEX_INITIALIZER};

static void *holder(void *arg) {
    long i = (long)arg;
    pthread_mutex_lock(&held[i]);
    pthread_barrier_wait(&holding);
    /* Tell the exiter, so that all of this is recorded before it calls exit(). */
    pthread_mutex_lock(&done_lock);
    done++;
    pthread_cond_signal(&done_cond);
    pthread_mutex_unlock(&done_lock);
    for (;;)
        pause(); /* holds the lock until the process ends */
    return NULL;
}

static void *exiter(void *arg) {
    (void)arg;
    pthread_barrier_wait(&holding);
    pthread_mutex_lock(&done_lock);
    while (done < 3)
        pthread_cond_wait(&done_cond, &done_lock);
    pthread_mutex_unlock(&done_lock);
    for (int i = 0; i < 500; i++) {
        pthread_mutex_lock(&total_lock);
        total++;
        pthread_mutex_unlock(&total_lock);
    }
    fflush(stdout);
    exit(3);
}

static int exit_scenario(void) {
    pthread_barrier_init(&holding, NULL, 4);
    pthread_t t[4];
    for (long i = 0; i < 3; i++)
        CHECK(pthread_create(&t[i], NULL, holder, (void *)i) == 0);
    CHECK(pthread_create(&t[3], NULL, exiter, NULL) == 0);
    pthread_join(t[0], NULL); /* never returns: the exiter ends the process */
    return 1;
}

/* ---- pexit: pthread_exit from workers and from main -------------------------------------- */

static void nested_exit(long value) {
    pthread_mutex_lock(&total_lock);
    total++;
    pthread_mutex_unlock(&total_lock);
    pthread_exit((void *)value);
}

static void *exiting_worker(void *arg) {
    long i = (long)arg;
    if (i == 2)
        usleep(50000); /* outlives main */
    for (int k = 0; k < 100; k++) {
        pthread_mutex_lock(&total_lock);
        total++;
        pthread_mutex_unlock(&total_lock);
    }
    if (i == 0)
        pthread_exit((void *)10L);
    nested_exit(10 + i);
    return NULL;
}

/* Created inside the C library (C11's threads call its pthread functions directly), so the
 * interposer does not see it: it must still keep the process alive. */
static int c11_thread(void *arg) {
    (void)arg;
    usleep(150000);
    printf("pexit: the C11 thread ends last\n");
    fflush(stdout);
    return 0;
}

static int pexit(void) {
    thrd_t c11;
    CHECK(thrd_create(&c11, c11_thread, NULL) == thrd_success);
    CHECK(thrd_detach(c11) == thrd_success);
    pthread_t t[3];
    for (long i = 0; i < 3; i++)
        CHECK(pthread_create(&t[i], NULL, exiting_worker, (void *)i) == 0);
    for (int i = 0; i < 2; i++) {
        void *r;
        CHECK(pthread_join(t[i], &r) == 0);
        CHECK((long)r == 10 + i);
    }
    printf("pexit: main leaves first\n");
    fflush(stdout);
    pthread_exit(NULL); /* the process ends when worker 2 does */
}

/* ---- static: a thread started by a constructor, before main ------------------------------ */

static pthread_t early;
static int early_started;

static void *early_worker(void *arg) {
    (void)arg;
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&total_lock);
        total++;
        pthread_mutex_unlock(&total_lock);
    }
    return NULL;
}

__attribute__((constructor)) static void start_early(void) {
    const char *s = getenv("WORKLOAD_EARLY_THREAD");
    if (s && strcmp(s, "1") == 0) {
        CHECK(pthread_create(&early, NULL, early_worker, NULL) == 0);
        early_started = 1;
    }
}

static int static_scenario(void) {
    CHECK(early_started);
    CHECK(pthread_join(early, NULL) == 0);
    printf("static: total %ld\n", total);
    return 0;
}

/* ---- cancel: threads cancelled while waiting, sleeping, and as they start ----------------- */

static void unlock_it(void *m) {
    pthread_mutex_unlock(m);
}

static void *cancelled_waiter(void *arg) {
    (void)arg;
    pthread_mutex_lock(&done_lock);
    pthread_cleanup_push(unlock_it, &done_lock);
    for (;;)
        pthread_cond_wait(&done_cond, &done_lock);
    pthread_cleanup_pop(1);
    return NULL;
}

static void *cancelled_sleeper(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&total_lock);
        total++;
        pthread_mutex_unlock(&total_lock);
        usleep(1000);
    }
    return NULL;
}

static int cancel_scenario(void) {
    pthread_t w, s;
    CHECK(pthread_create(&w, NULL, cancelled_waiter, NULL) == 0);
    CHECK(pthread_create(&s, NULL, cancelled_sleeper, NULL) == 0);
    usleep(50000);
    CHECK(pthread_cancel(w) == 0);
    CHECK(pthread_cancel(s) == 0);
    void *r;
    CHECK(pthread_join(w, &r) == 0 && r == PTHREAD_CANCELED);
    CHECK(pthread_join(s, &r) == 0 && r == PTHREAD_CANCELED);
    /* Cancelled at once: most are still starting (recording their begin) when it comes. */
    for (int i = 0; i < 20; i++) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, cancelled_sleeper, NULL) == 0);
        CHECK(pthread_cancel(t) == 0);
        CHECK(pthread_join(t, &r) == 0 && r == PTHREAD_CANCELED);
    }
    /* The waiter's cleanup handler released the mutex. */
    CHECK(pthread_mutex_trylock(&done_lock) == 0);
    pthread_mutex_unlock(&done_lock);
    printf("cancel: 22 threads cancelled\n");
    return 0;
}

/* ---- overflow: more mutexes than the interposer's table has room for --------------------- */

#define MANY 70000

static pthread_mutex_t *many;

static void *overflow_worker(void *arg) {
    long half = (long)arg;
    for (long i = half; i < MANY; i += 2) {
        pthread_mutex_lock(&many[i]);
        pthread_mutex_unlock(&many[i]);
    }
    return NULL;
}

static int overflow(void) {
    many = calloc(MANY, sizeof *many);
    CHECK(many != NULL);
    for (long i = 0; i < MANY; i++)
        CHECK(pthread_mutex_init(&many[i], NULL) == 0);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, overflow_worker, (void *)i) == 0);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    printf("overflow: %d mutexes\n", MANY);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s pool|prodcons|detached|barrier|rwlock|fork|exit|pexit|static|overflow|cancel\n",
                argv[0]);
        return 2;
    }
    const char *s = argv[1];
    if (!strcmp(s, "pool")) return pool();
    if (!strcmp(s, "prodcons")) return prodcons();
    if (!strcmp(s, "detached")) return detached();
    if (!strcmp(s, "barrier")) return barrier_scenario();
    if (!strcmp(s, "rwlock")) return rwlock();
    if (!strcmp(s, "fork")) return fork_scenario(argv[0]);
    if (!strcmp(s, "exit")) return exit_scenario();
    if (!strcmp(s, "pexit")) return pexit();
    if (!strcmp(s, "static")) return static_scenario();
    if (!strcmp(s, "overflow")) return overflow();
    if (!strcmp(s, "cancel")) return cancel_scenario();
    fprintf(stderr, "unknown scenario %s\n", s);
    return 2;
}
