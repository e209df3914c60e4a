/*
 * mapguard.h - survives a mapped file that shrinks under the process.
 *
 * Reading a page of a shared or private file mapping past the file's end
 * raises SIGBUS, which kills the process: a model's resident.bin truncated
 * while a server runs would take the server down. A registered mapping is
 * guarded: a SIGBUS inside it maps zero pages over the rest of the mapping
 * (so the faulting read completes, reading zeros) and counts the fault;
 * the owner asks rkm_mapguard_faults after its computation and reports an
 * error instead of the results. A SIGBUS anywhere else keeps the action it
 * had (the handler restores it and the fault repeats).
 *
 * Threads: add/remove from any thread (a mutex); the handler runs on the
 * faulting thread and only reads the fixed table (atomics) and calls mmap.
 * Ownership: the caller keeps its mapping; remove before munmap.
 */
#ifndef RKM_UTIL_MAPGUARD_H
#define RKM_UTIL_MAPGUARD_H

#include <stddef.h>

/* Guards [addr, addr + len): a slot >= 0, or -1 when the table is full or
 * the handler cannot be installed (the mapping is then unguarded). */
int rkm_mapguard_add(void *addr, size_t len);
void rkm_mapguard_remove(int slot);
/* SIGBUS faults caught in the slot's mapping since it was added. */
unsigned rkm_mapguard_faults(int slot);

#endif
