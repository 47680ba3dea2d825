#ifndef PUSHCHAT_CALLOCATOR_H
#define PUSHCHAT_CALLOCATOR_H

#include <stddef.h>

/// What the C allocator holds, from glibc's mallinfo2 (all zero where it is not available).
typedef struct {
    /// Bytes handed out and not yet freed: live data, small chunks and mmapped ones.
    size_t in_use;
    /// Bytes freed but kept in the allocator's heaps (not returned to the system).
    size_t free;
    /// 1 where the figures are real (glibc), 0 otherwise.
    int available;
} pushchat_heap_statistics;

pushchat_heap_statistics pushchat_heap_statistics_now(void);

#endif
