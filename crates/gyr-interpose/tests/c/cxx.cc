// A C++ program under the interposer: std::thread, std::mutex, std::condition_variable (whose
// timed waits call pthread_cond_clockwait), std::shared_mutex, std::timed_mutex (whose timed
// locks call pthread_mutex_clocklock) and a thread_local whose destructor locks. It checks its
// own results and exits non-zero when one is wrong.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
            std::exit(99);                                                        \
        }                                                                         \
    } while (0)

static std::mutex queue_lock;
static std::condition_variable queue_ready;
static std::deque<int> queue;
static bool closed;
static std::mutex total_lock;
static long total;  // the even items, under total_lock
static std::timed_mutex timed;
static long odd_total;  // the odd items, under the timed mutex
static std::shared_mutex table;
static long table_value;
static long ended;
static long waits;

struct AtEnd {
    ~AtEnd() {
        std::lock_guard<std::mutex> g(total_lock);
        ended++;
    }
};
static thread_local AtEnd at_end;

static void worker() {
    (void)&at_end;  // the destructor runs as the thread ends, after the thread's last event
    for (;;) {
        int item;
        {
            std::unique_lock<std::mutex> l(queue_lock);
            while (queue.empty() && !closed) {
                waits++;
                queue_ready.wait_for(l, std::chrono::milliseconds(2));
            }
            if (queue.empty())
                return;
            item = queue.front();
            queue.pop_front();
        }
        if (item % 2) {
            CHECK(timed.try_lock_for(std::chrono::seconds(10)));
            odd_total += item;
            timed.unlock();
        } else {
            std::lock_guard<std::mutex> g(total_lock);
            total += item;
        }
        if (item % 5 == 0) {
            std::unique_lock<std::shared_mutex> w(table);
            table_value++;
        } else {
            std::shared_lock<std::shared_mutex> r(table);
            CHECK(table_value >= 0);
        }
    }
}

int main() {
    std::vector<std::thread> workers;
    for (int i = 0; i < 3; i++)
        workers.emplace_back(worker);
    // The workers wait for work before there is any (however slowly they start).
    for (;;) {
        {
            std::lock_guard<std::mutex> g(queue_lock);
            if (waits >= 3)
                break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (int i = 1; i <= 1000; i++) {
        std::lock_guard<std::mutex> g(queue_lock);
        queue.push_back(i);
        queue_ready.notify_one();
    }
    {
        std::lock_guard<std::mutex> g(queue_lock);
        closed = true;
    }
    queue_ready.notify_all();
    for (auto &w : workers)
        w.join();
    // Each sum has a lock of its own: one sum under two locks would be a data race.
    CHECK(odd_total == 500L * 500);
    CHECK(total == 1000L * 1001 / 2 - 500L * 500);
    CHECK(table_value == 200);
    CHECK(ended == 3);
    std::printf("cxx: total %ld\n", total + odd_total);
    return 0;
}
