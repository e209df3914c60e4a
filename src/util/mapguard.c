/*
 * mapguard.c - the SIGBUS guard of file mappings (mapguard.h).
 */
#include "util/mapguard.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SLOTS 64

static struct {
    _Atomic uintptr_t start, end; /* end 0: free */
    atomic_uint faults;
} slot[SLOTS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int installed;
static struct sigaction previous;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    uintptr_t a = (uintptr_t)si->si_addr;
    for (int i = 0; i < SLOTS; i++) {
        uintptr_t s = atomic_load(&slot[i].start), e = atomic_load(&slot[i].end);
        if (!e || a < s || a >= e) continue;
        uintptr_t page = a & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
        if (mmap((void *)page, e - page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
            break;
        atomic_fetch_add(&slot[i].faults, 1);
        return;
    }
    /* not ours: the previous handler, or the default action when the
     * fault repeats */
    if (previous.sa_flags & SA_SIGINFO) {
        if (previous.sa_sigaction) {
            previous.sa_sigaction(sig, si, uc);
            return;
        }
    } else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN && previous.sa_handler) {
        previous.sa_handler(sig);
        return;
    }
    sigaction(SIGBUS, &previous, NULL);
}

int rkm_mapguard_add(void *addr, size_t len)
{
    if (!addr || !len) return -1;
    pthread_mutex_lock(&mu);
    int got = -1;
    if (!installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGBUS, &sa, &previous) == 0) installed = 1;
    }
    for (int i = 0; installed && i < SLOTS && got < 0; i++)
        if (!atomic_load(&slot[i].end)) {
            atomic_store(&slot[i].faults, 0);
            atomic_store(&slot[i].start, (uintptr_t)addr);
            atomic_store(&slot[i].end, (uintptr_t)addr + len);
            got = i;
        }
    pthread_mutex_unlock(&mu);
    return got;
}

void rkm_mapguard_remove(int i)
{
    if (i < 0 || i >= SLOTS) return;
    pthread_mutex_lock(&mu);
    atomic_store(&slot[i].end, 0);
    atomic_store(&slot[i].start, 0);
    pthread_mutex_unlock(&mu);
}

unsigned rkm_mapguard_faults(int i)
{
    return i >= 0 && i < SLOTS ? atomic_load(&slot[i].faults) : 0;
}
